import type { FastifyReply, FastifyRequest } from "fastify";
import { agentOfToken, agentTokenExpiresAtMs } from "../proxy/agent-token.js";
import type { GatewayContext } from "../rest/context.js";
import { HttpError } from "../rest/plugins/errors.js";

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** 401 with the RFC 6750 challenge, so that a client knows to (re)authenticate with a bearer token. */
export function unauthorized(reply: FastifyReply, message: string, tokenSent: boolean) {
  const error = tokenSent ? `, error="invalid_token", error_description="${message.replace(/"/g, "'")}"` : "";
  return reply.code(401).header("WWW-Authenticate", `Bearer realm="pgtoll"${error}`).send({ error: message });
}

/** What the endpoint knows of an open session: the agent and provider it is for, and the token last verified. */
export interface KnownSession {
  wallet: string;
  providerId: string;
  token: string;
}

/**
 * Authenticates a request to `/mcp` by its bearer agent token for the provider it names, and counts it against
 * the agent's rate limit. Answers 401/429 itself (then resolves null); a malformed provider id is a 400.
 */
export function remoteAuthentication(
  ctx: GatewayContext,
  perAgentPerMinute: number,
  sessionOf: (request: FastifyRequest) => KnownSession | undefined,
) {
  return async function authenticate(request: FastifyRequest, reply: FastifyReply) {
    const header = request.headers.authorization;
    const token = typeof header === "string" && header.startsWith("Bearer ") ? header.slice(7).trim() : "";
    const query = request.query as { provider?: string };
    const providerId = String(query.provider ?? request.headers["x-pgtoll-provider"] ?? "").toLowerCase();
    if (!token) {
      unauthorized(
        reply,
        "missing agent token: send Authorization: Bearer <token from pgtoll agent-token>",
        false,
      );
      return null;
    }
    if (!UUID.test(providerId))
      throw new HttpError(
        400,
        "name the provider: /mcp?provider=<provider id> (or the X-Pgtoll-Provider header)",
      );
    // A session's own token, already verified, is not verified again on each of its requests.
    const known = sessionOf(request);
    const signer =
      known?.token === token && known.providerId === providerId && Date.now() < agentTokenExpiresAtMs(token)
        ? { ok: true as const, wallet: known.wallet }
        : await agentOfToken(token, providerId);
    if (!signer.ok) {
      unauthorized(reply, `invalid agent token: ${signer.reason}`, true);
      return null;
    }
    if (ctx.config.rateLimit) {
      const hit = await ctx.rateLimitStore.hit(`mcp:${signer.wallet}`, 60_000).catch((error: unknown) => {
        ctx.logger.warn({ err: error }, "rate-limit store unavailable; request let through");
        return null;
      });
      if (hit && hit.count > perAgentPerMinute) {
        const retryAfter = Math.max(1, Math.ceil((hit.resetAtMs - Date.now()) / 1000));
        reply
          .code(429)
          .header("Retry-After", retryAfter)
          .send({
            error: `too many MCP requests from this agent: at most ${perAgentPerMinute} a minute`,
            retryAfter,
          });
        return null;
      }
    }
    return { wallet: signer.wallet, providerId, token };
  };
}
