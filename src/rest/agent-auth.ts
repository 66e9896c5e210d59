import type { FastifyRequest } from "fastify";
import { type AgentTokenCheck, agentTokenExpiresAtMs, verifyAgentToken } from "../proxy/agent-token.js";
import type { GatewayContext } from "./context.js";
import { HttpError } from "./plugins/errors.js";

/** Checks that the request may act for `wallet` with `providerId`; throws a 401 (or 400) when it may not. */
export type AuthenticateAgent = (
  request: FastifyRequest,
  wallet: string,
  providerId: string | undefined,
) => Promise<void>;

export interface AgentAuthOptions {
  /**
   * Require the agent token whatever PGTOLL_REST_AGENT_AUTH says: for what only the agent itself may change (its
   * budgets), where a wallet address anyone can read is not proof enough.
   */
  required?: boolean;
  /** Most verified tokens remembered; when full, it starts over. Default 10 000. */
  maxEntries?: number;
  verify?: typeof verifyAgentToken;
  now?: () => number;
}

/**
 * With PGTOLL_REST_AGENT_AUTH=signature, an agent endpoint also needs `Authorization: Bearer <agent token>`: the
 * same EIP-191 token the wire proxy takes as password, signed by `wallet` for `providerId`. With the default
 * `wallet`, the wallet in the request identifies the agent, as the spec says.
 *
 * A token that verified is remembered, by its exact text and the wallet and provider it was checked for, until
 * it expires: an agent sends the same token with every request, and recovering the signer of an EIP-191
 * signature costs far more than the rest of a request. The answer for a remembered token is the one verifying it
 * again would give.
 */
export function agentAuthentication(ctx: GatewayContext, options: AgentAuthOptions = {}): AuthenticateAgent {
  const signature = options.required === true || ctx.config.restAgentAuth === "signature";
  const verify = options.verify ?? verifyAgentToken;
  const now = options.now ?? Date.now;
  const maxEntries = options.maxEntries ?? 10_000;
  /** `wallet provider token` -> the instant (ms) the token expires. */
  const verified = new Map<string, number>();

  return async (request, wallet, providerId) => {
    if (!signature) return;
    const header = request.headers.authorization;
    const token = typeof header === "string" && header.startsWith("Bearer ") ? header.slice(7).trim() : "";
    if (!token)
      throw new HttpError(
        401,
        "missing agent token: send Authorization: Bearer <token from pgtoll agent-token>",
      );
    if (!providerId)
      throw new HttpError(400, "providerId is required: agent tokens are made for one provider");
    const key = `${wallet} ${providerId} ${token}`;
    const at = now();
    const expiresAt = verified.get(key);
    if (expiresAt !== undefined && at < expiresAt) return;
    const check: AgentTokenCheck = await verify(token, wallet, providerId, at);
    if (!check.ok) {
      verified.delete(key);
      throw new HttpError(401, `invalid agent token: ${check.reason}`);
    }
    if (verified.size >= maxEntries) verified.clear();
    verified.set(key, agentTokenExpiresAtMs(token));
  };
}
