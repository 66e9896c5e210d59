import { createServer, type Server, type Socket } from "node:net";
import { type ProxyContext, runClientSession } from "./client-session.js";
import { ownHostAddresses } from "./own-host.js";
import { errorFrame, SqlState } from "./proxy-errors.js";
import { isQuotaRefusal, type QuotaRefusal, SessionQuota } from "./session-quota.js";

export interface RunningProxy {
  host: string;
  port: number;
  close(): Promise<void>;
}

/**
 * Listens for PostgreSQL clients and runs each connection as a metered session. `close()` stops accepting,
 * ends every session (their charges are written and reservations released) and resolves when all sockets
 * are gone.
 */
export async function startProxyServer(
  ctx: ProxyContext,
  options: { host: string; port: number },
): Promise<RunningProxy> {
  const sockets = new Set<Socket>();
  const total = ctx.maxConnections ?? 10_000;
  const quota = new SessionQuota({
    perAddress: ctx.sessionsPerAddress ?? 0,
    total,
    exempt: ctx.exemptFromAddressLimit ?? ownHostAddresses(),
  });
  const server: Server = createServer((socket) => {
    sockets.add(socket);
    const place = quota.take(socket.remoteAddress);
    socket.once("close", () => {
      sockets.delete(socket);
      if (!isQuotaRefusal(place)) place.release();
    });
    if (isQuotaRefusal(place)) return refuse(socket, place, ctx);
    runClientSession(socket, ctx).catch((error: unknown) => {
      ctx.logger.error({ err: error }, "proxy session crashed");
      socket.destroy();
    });
  });
  // A backstop only: beyond the limits, a connection gets an ErrorResponse saying which one it reached.
  server.maxConnections = 2 * total;
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port, options.host, () => resolve());
  });
  server.on("error", (error) => ctx.logger.error({ err: error }, "proxy listener error"));
  const address = server.address();
  const port = typeof address === "object" && address ? address.port : options.port;
  return {
    host: options.host,
    port,
    async close() {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      // Sessions hear of their socket's close after the server does, then settle what they left upstream.
      const gone = [...sockets]
        .filter((socket) => !socket.closed)
        .map((socket) => new Promise<void>((resolve) => socket.once("close", () => resolve())));
      for (const socket of sockets) socket.destroy();
      await closed;
      await Promise.all(gone);
      await new Promise<void>((resolve) => setImmediate(resolve));
      while (ctx.releases.size > 0) await Promise.all(ctx.releases);
      await ctx.chargeWriter.flush();
    },
  };
}

/** How long a refused client has to read its answer and close. */
const REFUSED_LINGER_MS = 5000;
/** SSLRequest and GSSENCRequest: 8 bytes, the length then the request code. */
const ENCRYPTION_REQUESTS = new Set([80877103, 80877104]);

/**
 * 53300, as PostgreSQL answers when it cannot start a backend. An encryption request first gets `N`, so that
 * the error comes where the client reads one (after the `N`, libpq sends its startup packet in the clear, or
 * gives up if it requires TLS); anything else gets the error at once.
 */
function refuse(socket: Socket, reached: QuotaRefusal, ctx: ProxyContext): void {
  socket.on("error", () => {});
  // A client that keeps its side open is cut off.
  setTimeout(() => socket.destroy(), REFUSED_LINGER_MS).unref();
  const message =
    reached.scope === "address"
      ? `too many connections from this address: at most ${reached.limit} (PGTOLL_PROXY_SESSIONS_PER_IP)`
      : `too many connections to pgtoll's wire proxy: at most ${reached.limit} (PGTOLL_PROXY_MAX_CONNECTIONS)`;
  ctx.metrics.sessionsRefused
    .labels(reached.scope === "address" ? "address_limit" : "connection_limit")
    .inc();
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
