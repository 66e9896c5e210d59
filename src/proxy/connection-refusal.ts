import type { Socket } from "node:net";
import { errorFrame, SqlState } from "./proxy-errors.js";
import type { ProxyMetrics } from "./proxy-metrics.js";
import type { QuotaRefusal } from "./session-quota.js";

/** How long a refused client has to read its answer and close. */
const REFUSED_LINGER_MS = 5000;
/** SSLRequest and GSSENCRequest: 8 bytes, the length then the request code. */
const ENCRYPTION_REQUESTS = new Set([80877103, 80877104]);

/**
 * 53300, as PostgreSQL answers when it cannot start a backend. An encryption request first gets `N`, so that
 * the error comes where the client reads one (after the `N`, libpq sends its startup packet in the clear, or
 * gives up if it requires TLS); anything else gets the error at once.
 */
export function refuseConnection(socket: Socket, reached: QuotaRefusal, metrics: ProxyMetrics): void {
  socket.on("error", () => {});
  // A client that keeps its side open is cut off.
  setTimeout(() => socket.destroy(), REFUSED_LINGER_MS).unref();
  const message =
    reached.scope === "address"
      ? `too many connections from this address: at most ${reached.limit} (PGTOLL_PROXY_SESSIONS_PER_IP)`
      : `too many connections to pgtoll's wire proxy: at most ${reached.limit} (PGTOLL_PROXY_MAX_CONNECTIONS)`;
  metrics.sessionsRefused.labels(reached.scope === "address" ? "address_limit" : "connection_limit").inc();
  const answer = errorFrame(SqlState.tooManyConnections, message, { fatal: true });
  let answered = false;
  // What the client sends is read and dropped: unread bytes would make the close a reset that can lose the answer.
  socket.on("data", (chunk: Buffer) => {
    if (answered) return;
    if (chunk.length === 8 && chunk.readInt32BE(0) === 8 && ENCRYPTION_REQUESTS.has(chunk.readInt32BE(4))) {
      socket.write("N");
      return;
    }
    answered = true;
    socket.end(answer);
  });
}
