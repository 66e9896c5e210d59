import { createServer, type Server, type Socket } from "node:net";
import { canonicalAddress } from "../net/canonical-address.js";
import { InProcessSocket } from "../net/in-process-socket.js";
import type { AuthenticatedAgent } from "./agent-session.js";
import { type ProxyContext, runClientSession } from "./client-session.js";
import { refuseConnection } from "./connection-refusal.js";
import { idleHoldsOf } from "./idle-holds.js";
import { ownHostAddresses } from "./own-host.js";
import { readClientAddress } from "./proxied-address.js";
import { isQuotaRefusal, SessionQuota } from "./session-quota.js";

export interface RunningProxy {
  host: string;
  port: number;
  /**
   * Stops gracefully: refuses new connections, lets each agent session finish its statement and transaction
   * for at most `graceMs` and ends it with 57P01, then closes as `close()` does.
   */
  drain(graceMs: number): Promise<void>;
  close(): Promise<void>;
  /**
   * A connection to this proxy from within the process (an in-process socket, no TCP), served as a client on
   * loopback is: it starts up and authenticates like any other. It counts in the proxy's limits, and `drain` and
   * `close` end it like the others.
   *
   * With `agent`, the connection is that agent's, already authenticated by the caller: its startup must name that
   * wallet and provider, and no password is asked for. **Warning:** pass only an agent that pgtoll itself has
   * authenticated (a verified request signature or payment); the socket then acts as that agent.
   */
  connectInProcess(agent?: AuthenticatedAgent): InProcessSocket;
  /**
   * Has the agent's sessions with the provider that sit idle on its funds give their holds back (`IdleHolds`);
   * the promise of those releases, undefined when none was idle.
   */
  reclaimIdleHolds(agentWallet: string, providerId: string): Promise<void> | undefined;
}

/** The address an in-process connection is served as. */
const IN_PROCESS_ADDRESS = "127.0.0.1";

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
  /** Runs a connection whose client address is known: the peer's, or the one its PROXY header gave. */
  const accept = (socket: Socket, address: string | undefined, agent?: AuthenticatedAgent) => {
    const place = quota.take(address);
    socket.once("close", () => {
      if (!isQuotaRefusal(place)) place.release();
    });
    if (isQuotaRefusal(place)) return refuseConnection(socket, place, ctx.metrics);
    runClientSession(socket, ctx, address, agent).catch((error: unknown) => {
      ctx.logger.error({ err: error }, "proxy session crashed");
      socket.destroy();
    });
  };
  let whenAllClosed: (() => void) | undefined;
  const allClosed = () =>
    sockets.size === 0 ? Promise.resolve() : new Promise<void>((resolve) => (whenAllClosed = resolve));
  const track = (socket: Socket) => {
    sockets.add(socket);
    socket.once("close", () => {
      sockets.delete(socket);
      if (sockets.size === 0) whenAllClosed?.();
    });
  };
  const server: Server = createServer((socket) => {
    track(socket);
    const peer = canonicalAddress(socket.remoteAddress);
    if (!ctx.proxyProtocol?.trusted(peer)) return accept(socket, peer);
    socket.on("error", () => {});
    void readClientAddress(socket, ctx.proxyProtocol, {
      logger: ctx.logger,
      metrics: ctx.metrics,
      timeoutMs: ctx.startupTimeoutMs,
    }).then((address) => {
      if (address === null || socket.closed) return;
      accept(socket, address);
      // The header's reader left the socket paused, with the client's first bytes put back.
      if (!socket.destroyed) socket.resume();
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
  let closed: Promise<void> | undefined;
  /** `close()` was called: no connection is served any more, in-process ones included (a drain still serves those). */
  let shut = false;
  const stopListening = () => {
    closed ??= new Promise<void>((resolve) => server.close(() => resolve()));
    return closed;
  };
  const running: RunningProxy = {
    host: options.host,
    port,
    async drain(graceMs) {
      const listenerClosed = stopListening();
      const drain = ctx.drain;
      if (drain) {
        drain.begin();
        // Connections still starting up become sessions that end at once: wait for every socket, not only sessions.
        let timer: NodeJS.Timeout | undefined;
        const graceOver = new Promise<void>((resolve) => (timer = setTimeout(resolve, graceMs)));
        await Promise.race([allClosed(), graceOver]);
        clearTimeout(timer);
        if (drain.size > 0) {
          ctx.logger.warn({ sessions: drain.size, graceMs }, "grace over: ending the sessions still open");
          drain.endAll();
        }
      }
      await running.close();
      await listenerClosed;
    },
    async close() {
      shut = true;
      const closed = stopListening();
      // Sessions hear of their socket's close after the server does, then drain and charge what they left upstream.
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
    reclaimIdleHolds(agentWallet, providerId) {
      return idleHoldsOf(ctx).reclaim(agentWallet, providerId);
    },
    connectInProcess(agent) {
      const [client, served] = InProcessSocket.pair();
      const socket = served as unknown as Socket;
      track(socket);
      // While the server drains, REST and MCP requests still reaching it are served; their sessions end after
      // their first answer (agent-session.ts).
      if (shut) socket.destroy();
      // The client is this process: loopback in every rule that asks where a client is (TLS, per-address limits).
      else accept(socket, IN_PROCESS_ADDRESS, agent);
      return client;
    },
  };
  return running;
}
