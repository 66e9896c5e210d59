import type { FastifyReply } from "fastify";
import type { QuotaRefusal } from "../proxy/session-quota.js";

/** A client that opened too many sessions waits for its idle ones to close (or closes them with DELETE). */
const RETRY_AFTER_SECONDS = 60;

/**
 * The answer to an `initialize` beyond the remote MCP endpoint's limits: 429 for the client's address, 503 for
 * the process (all sessions, or those open to agents without funds), each with `Retry-After` and a JSON-RPC
 * error that names the limit.
 */
export function refuseSession(reply: FastifyReply, reached: QuotaRefusal): FastifyReply {
  const [status, message] =
    reached.scope === "address"
      ? [
          429,
          `too many MCP sessions from this address: at most ${reached.limit} (PGTOLL_MCP_SESSIONS_PER_IP)`,
        ]
      : reached.scope === "unfunded"
        ? [
            503,
            `the ${reached.limit} MCP sessions open to agents without funds are in use; ` +
              "fund your balance with this provider to use the share kept for funded agents",
          ]
        : [503, `too many MCP sessions: at most ${reached.limit} (PGTOLL_MCP_MAX_SESSIONS)`];
  return reply
    .code(status)
    .header("Retry-After", RETRY_AFTER_SECONDS)
    .send({ jsonrpc: "2.0", error: { code: -32000, message }, id: null });
}
