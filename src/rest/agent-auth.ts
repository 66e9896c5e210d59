import type { FastifyRequest } from "fastify";
import { verifyAgentToken } from "../proxy/agent-token.js";
import type { GatewayContext } from "./context.js";
import { HttpError } from "./plugins/errors.js";

/**
 * With PGTOLL_REST_AGENT_AUTH=signature, an agent endpoint also needs `Authorization: Bearer <agent token>`: the
 * same EIP-191 token the wire proxy takes as password, signed by `wallet` for `providerId`. With the default
 * `wallet`, the wallet in the request identifies the agent, as the spec says.
 */
export async function authenticateAgent(
  ctx: GatewayContext,
  request: FastifyRequest,
  wallet: string,
  providerId: string | undefined,
): Promise<void> {
  if (ctx.config.restAgentAuth !== "signature") return;
  const header = request.headers.authorization;
  const token = typeof header === "string" && header.startsWith("Bearer ") ? header.slice(7).trim() : "";
  if (!token)
    throw new HttpError(
      401,
      "missing agent token: send Authorization: Bearer <token from pgtoll agent-token>",
    );
  if (!providerId) throw new HttpError(400, "providerId is required: agent tokens are made for one provider");
  const check = await verifyAgentToken(token, wallet, providerId);
  if (!check.ok) throw new HttpError(401, `invalid agent token: ${check.reason}`);
}
