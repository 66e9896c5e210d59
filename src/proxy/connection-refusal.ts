import type { Socket } from "node:net";
import { SqlState } from "../db/sql-state.js";
import { errorFrame } from "./proxy-errors.js";
import type { ProxyMetrics } from "./proxy-metrics.js";
import { closeRefused, REFUSAL_LINGER_MS } from "./refused-socket.js";
import type { QuotaRefusal } from "./session-quota.js";

/** SSLRequest and GSSENCRequest: 8 bytes, the length then the request code. */
const ENCRYPTION_REQUESTS = new Set([80877103, 80877104]);

/**
 * 53300, as PostgreSQL answers when it cannot start a backend, then the close of every refused connection
 * (closeRefused). An encryption request first gets `N`, so that the error comes where the client reads one
 * (after the `N`, libpq sends its startup packet in the clear, or gives up if it requires TLS).
 */
export function refuseConnection(socket: Socket, reached: QuotaRefusal, metrics: ProxyMetrics): void {
  socket.on("error", () => {});
  const message =
    reached.scope === "address"
      ? `too many connections from this address: at most ${reached.limit} (PGTOLL_PROXY_SESSIONS_PER_IP)`
      : `too many connections to pgtoll's wire proxy: at most ${reached.limit} (PGTOLL_PROXY_MAX_CONNECTIONS)`;
  metrics.sessionsRefused.labels(reached.scope === "address" ? "address_limit" : "connection_limit").inc();
  const answer = errorFrame(SqlState.tooManyConnections, message, { fatal: true });
  const answerNow = () => {
    clearTimeout(silent);
    socket.off("data", first);
    socket.pause();
    closeRefused(socket, answer);
  };
  // A client that says nothing gets the answer all the same.
  const silent = setTimeout(answerNow, REFUSAL_LINGER_MS);
  let asked = false;
  const first = (chunk: Buffer) => {
    if (
      !asked &&
      chunk.length === 8 &&
      chunk.readInt32BE(0) === 8 &&
      ENCRYPTION_REQUESTS.has(chunk.readInt32BE(4))
    ) {
      asked = true;
      socket.write("N");
      return;
    }
    answerNow();
  };
  socket.on("data", first);
}
