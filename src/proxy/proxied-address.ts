import type { Socket } from "node:net";
import type { Logger } from "pino";
import { canonicalAddress } from "../net/canonical-address.js";
import type { ProxyMetrics } from "./proxy-metrics.js";
import { ProxyHeaderError, readProxyHeader } from "./proxy-protocol.js";

/** How the wire proxy takes PROXY protocol headers (PGTOLL_TRUSTED_PROXIES, PGTOLL_PROXY_PROTOCOL). */
export interface ProxiedAddressSettings {
  /** Whether a peer is a load balancer whose header is believed. */
  trusted(address: string | undefined): boolean;
  /** A trusted peer must send a header; without one the connection is closed. */
  required: boolean;
}

/**
 * The address of the client behind a connection, in its canonical spelling (canonicalAddress): its peer's, or,
 * from a trusted load balancer, the one its PROXY header carries (the header is consumed; the bytes after it are put back, the socket left paused).
 * Resolves null once it has closed the connection: a bad header, a missing one where required, a peer that
 * went away or sent nothing within `timeoutMs`. Only trusted peers are read here: anyone else's header
 * reaches the startup parser, which refuses it.
 */
export function readClientAddress(
  socket: Socket,
  settings: ProxiedAddressSettings | undefined,
  deps: { logger: Logger; metrics: ProxyMetrics; timeoutMs: number },
): Promise<string | undefined | null> {
  const peer = canonicalAddress(socket.remoteAddress);
  if (!settings?.trusted(peer)) return Promise.resolve(peer);
  return new Promise((resolve) => {
    let received: Buffer = Buffer.alloc(0);
    const finish = (address: string | undefined | null, rest?: Buffer) => {
      clearTimeout(timer);
      socket.removeListener("data", onData);
      socket.removeListener("close", onClose);
      socket.pause();
      if (address === null) socket.destroy();
      else if (rest && rest.length > 0) socket.unshift(rest);
      resolve(address);
    };
    const refuse = (outcome: string, message: string, error?: unknown) => {
      deps.metrics.proxyHeaders.labels(outcome).inc();
      deps.metrics.sessionsRefused.labels(`proxy_header_${outcome}`).inc();
      deps.logger.warn({ peer, ...(error ? { err: error } : {}) }, message);
      finish(null);
    };
    const onData = (chunk: Buffer) => {
      received = received.length === 0 ? chunk : Buffer.concat([received, chunk]);
      try {
        const read = readProxyHeader(received);
        if (read.kind === "incomplete") return;
        if (read.kind === "absent") {
          if (settings.required)
            return refuse(
              "missing",
              `closed a connection from load balancer ${peer}: no PROXY protocol header, and PGTOLL_PROXY_PROTOCOL=required`,
            );
          deps.metrics.proxyHeaders.labels("missing").inc();
          return finish(peer, received);
        }
        const { header } = read;
        deps.metrics.proxyHeaders.labels(header.command === "proxy" ? "accepted" : "local").inc();
        finish(header.command === "proxy" ? header.source.address : peer, received.subarray(read.length));
      } catch (error) {
        if (!(error instanceof ProxyHeaderError)) throw error;
        refuse(
          "invalid",
          `closed a connection from load balancer ${peer}: invalid PROXY protocol header`,
          error,
        );
      }
    };
    // A balancer's TCP health check connects and closes without a byte: nothing worth a warning.
    const onClose = () => finish(null);
    const timer = setTimeout(
      () =>
        refuse("missing", `closed a connection from load balancer ${peer}: no PROXY protocol header in time`),
      deps.timeoutMs,
    );
    socket.on("data", onData);
    socket.once("close", onClose);
  });
}
