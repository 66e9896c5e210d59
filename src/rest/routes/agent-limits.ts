import { Type } from "@sinclair/typebox";
import type { FastifyInstance, FastifyRequest } from "fastify";
import { checksumAddress } from "../../billing/address.js";
import {
  clearDailyLimit,
  type DailyLimit,
  getDailyLimit,
  setDailyLimit,
} from "../../billing/daily-limits.js";
import { parseMicro } from "../../billing/money.js";
import { findProvider } from "../../providers/registry.js";
import { agentAuthentication } from "../agent-auth.js";
import type { GatewayContext } from "../context.js";
import { HttpError } from "../plugins/errors.js";
import { presentDailyLimit } from "../present.js";
import { DailyLimitBody, DailyLimit as DailyLimitSchema, ErrorBody } from "../schemas.js";
import { uuidParam, walletParam } from "../validate.js";

/** The largest daily limit accepted, in micro-USDC (one billion USDC). */
const MAX_DAILY_LIMIT_MICRO = 1_000_000_000_000_000n;

const Params = Type.Object({ wallet: Type.String(), providerId: Type.String() });
type Params = { wallet: string; providerId: string };
const errors = { 400: ErrorBody, 401: ErrorBody, 404: ErrorBody };

/**
 * PUT, GET and DELETE /api/agents/:wallet/limits/:providerId: the agent's own daily limit with a provider. Only the
 * agent may read or change it (its token, `Authorization: Bearer pgtoll1...`, whatever PGTOLL_REST_AGENT_AUTH
 * says). The limit is enforced by the ledger's hold statements (billing/daily-limits.ts) on every surface.
 */
export async function agentLimitRoutes(app: FastifyInstance, { ctx }: { ctx: GatewayContext }) {
  const authenticate = agentAuthentication(ctx, { required: true });

  /** The wallet and provider of the path, once the agent's token for them is checked and the provider exists. */
  async function target(request: FastifyRequest<{ Params: Params }>) {
    const wallet = walletParam(request.params.wallet, "wallet address");
    const providerId = uuidParam(request.params.providerId, "provider id");
    await authenticate(request, wallet, providerId);
    if (!(await findProvider(ctx.db, providerId)))
      throw new HttpError(404, `provider ${providerId} not found`);
    return { wallet, providerId };
  }

  const present = (wallet: string, providerId: string, limit: DailyLimit) => ({
    agentWallet: checksumAddress(wallet),
    providerId,
    ...presentDailyLimit(limit),
  });

  app.put<{ Params: Params; Body: DailyLimitBody }>(
    "/api/agents/:wallet/limits/:providerId",
    {
      schema: {
        summary: "Set the agent's daily limit with a provider",
        tags: ["agents"],
        params: Params,
        body: DailyLimitBody,
        response: { 200: DailyLimitSchema, ...errors },
      },
    },
    async (request) => {
      const { wallet, providerId } = await target(request);
      const micro = parseMicro(request.body.dailyLimit.trim());
      if (micro === null || micro < 0n || micro > MAX_DAILY_LIMIT_MICRO)
        throw new HttpError(
          400,
          'invalid dailyLimit: expected a USDC amount from "0" to "1000000000" with at most 6 decimals, e.g. "5"',
        );
      const limit = await setDailyLimit(ctx.db, wallet, providerId, micro);
      ctx.limits?.changed(wallet, providerId);
      return present(wallet, providerId, limit);
    },
  );

  app.get<{ Params: Params }>(
    "/api/agents/:wallet/limits/:providerId",
    {
      schema: {
        summary: "The agent's daily limit with a provider and what it spent today",
        tags: ["agents"],
        params: Params,
        response: { 200: DailyLimitSchema, ...errors },
      },
    },
    async (request) => {
      const { wallet, providerId } = await target(request);
      return present(wallet, providerId, await getDailyLimit(ctx.db, wallet, providerId));
    },
  );

  app.delete<{ Params: Params }>(
    "/api/agents/:wallet/limits/:providerId",
    {
      schema: {
        summary: "Remove the agent's daily limit with a provider",
        tags: ["agents"],
        params: Params,
        response: { 204: Type.Null(), ...errors },
      },
    },
    async (request, reply) => {
      const { wallet, providerId } = await target(request);
      if (!(await clearDailyLimit(ctx.db, wallet, providerId)))
        throw new HttpError(404, "no daily limit is set for this agent and provider");
      ctx.limits?.changed(wallet, providerId);
      return reply.code(204).send();
    },
  );
}
