import { Type } from "@sinclair/typebox";
import type { FastifyInstance } from "fastify";
import { checksumAddress } from "../../billing/address.js";
import { getBalance, listLedgerEntries } from "../../billing/ledger.js";
import { formatMicro } from "../../billing/money.js";
import { findProvider } from "../../providers/registry.js";
import { agentAuthentication } from "../agent-auth.js";
import type { GatewayContext } from "../context.js";
import { HttpError } from "../plugins/errors.js";
import { presentLedgerEntry } from "../present.js";
import { Balance, ErrorBody, LedgerEntry, TransactionsQuery } from "../schemas.js";
import { uuidParam, walletParam } from "../validate.js";

export const MAX_TRANSACTIONS = 100;

/** GET /api/balance/:wallet/:providerId and GET /api/transactions/:wallet. */
export async function agentRoutes(app: FastifyInstance, { ctx }: { ctx: GatewayContext }) {
  const authenticate = agentAuthentication(ctx);
  app.get<{ Params: { wallet: string; providerId: string } }>(
    "/api/balance/:wallet/:providerId",
    {
      schema: {
        summary: "An agent's balance with a provider",
        tags: ["agents"],
        params: Type.Object({ wallet: Type.String(), providerId: Type.String() }),
        response: { 200: Balance, 400: ErrorBody, 404: ErrorBody },
      },
    },
    async (request) => {
      const wallet = walletParam(request.params.wallet, "wallet address");
      const providerId = uuidParam(request.params.providerId, "provider id");
      await authenticate(request, wallet, providerId);
      // Held by the agent's idle sessions in this process is the agent's to spend: given back, it shows so.
      await ctx.proxy?.reclaimIdleHolds?.(wallet, providerId);
      const [balance, provider] = await Promise.all([
        getBalance(ctx.db, wallet, providerId),
        findProvider(ctx.db, providerId),
      ]);
      if (!provider) throw new HttpError(404, `provider ${providerId} not found`);
      const never = balance.updatedAt === null;
      return {
        agentWallet: checksumAddress(wallet),
        providerId,
        balance: never ? "0" : formatMicro(balance.balanceMicro),
        available: never ? "0" : formatMicro(balance.balanceMicro - balance.reservedMicro),
        updatedAt: balance.updatedAt?.toISOString() ?? null,
      };
    },
  );

  app.get<{ Params: { wallet: string }; Querystring: TransactionsQuery }>(
    "/api/transactions/:wallet",
    {
      schema: {
        summary: "An agent's ledger entries, newest first",
        tags: ["agents"],
        params: Type.Object({ wallet: Type.String() }),
        querystring: TransactionsQuery,
        response: {
          200: Type.Object({ agentWallet: Type.String(), transactions: Type.Array(LedgerEntry) }),
          400: ErrorBody,
        },
      },
    },
    async (request) => {
      const wallet = walletParam(request.params.wallet, "wallet address");
      const providerId =
        request.query.providerId === undefined
          ? undefined
          : uuidParam(request.query.providerId, "providerId");
      await authenticate(request, wallet, providerId);
      const requested = request.query.limit === undefined ? 50 : Number(request.query.limit);
      if (requested < 1) throw new HttpError(400, "invalid limit: must be a whole number of at least 1");
      const limit = Math.min(requested, MAX_TRANSACTIONS);
      const entries = await listLedgerEntries(ctx.db, wallet, { providerId, limit });
      return { agentWallet: checksumAddress(wallet), transactions: entries.map(presentLedgerEntry) };
    },
  );
}
