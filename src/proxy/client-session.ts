import type { Socket } from "node:net";
import { type SecureContext, TLSSocket } from "node:tls";
import type pg from "pg";
import type { Logger } from "pino";
import type { ChargeWriter } from "../billing/charge-writer.js";
import type { GuardVerdict } from "../guard/index.js";
import { sendCancelRequest } from "../providers/cancel-request.js";
import { findProviderForQuery } from "../providers/registry.js";
import type { SecretBox } from "../providers/secret-box.js";
import { verifyAgentToken } from "./agent-token.js";
import { FRONTEND_MAX_FRAME_LENGTH, type Frame, FrameReader } from "./frame-reader.js";
import { decodePasswordMessage } from "./frontend-messages.js";
import { isLoopback } from "./loopback.js";
import { FrontendCode } from "./message-codes.js";
import { errorFrame, SqlState, StartupRefusal } from "./proxy-errors.js";
import type { ProxyMetrics } from "./proxy-metrics.js";
import { Relay } from "./relay.js";
import {
  encodeAuthenticationCleartextPassword,
  encodeAuthenticationOk,
  encodeBackendKeyData,
  encodeGSSENCResponse,
  encodeNegotiateProtocolVersion,
  encodeParameterStatus,
  encodeReadyForQuery,
  encodeSSLResponse,
  encodeTerminate,
} from "./serializer.js";
import { SessionMeter } from "./session-meter.js";
import type { SessionRegistry } from "./session-registry.js";
import { parseSessionRequest } from "./startup-options.js";
import { type StartupPacket, StartupReader } from "./startup-parser.js";
import { connectUpstream, parseUpstreamTarget, UpstreamStartupError } from "./upstream-connection.js";
import { SlotTimeoutError, type UpstreamSlots } from "./upstream-slots.js";

/** Everything a proxied session needs, shared by all sessions of one proxy server. */
export interface ProxyContext {
  db: pg.Pool;
  box: SecretBox;
  slots: UpstreamSlots;
  chargeWriter: ChargeWriter;
  registry: SessionRegistry;
  metrics: ProxyMetrics;
  logger: Logger;
  /** The guard, memoised by SQL text. */
  check(sql: string): GuardVerdict;
  /** When set, SSLRequest is answered 'S' and the session continues over TLS. */
  tls?: SecureContext;
  statementTimeoutMs: number;
  reservationTtlSeconds: number;
  reserveRows: number;
  /** Startup (TLS, authentication, upstream connect) must finish within this. */
  startupTimeoutMs: number;
  /** An idle session gives its unspent reservation back after this long. */
  idleReleaseMs: number;
  /** Reservations being given back by ended sessions; the server awaits them before it stops. */
  releases: Set<Promise<void>>;
}

/** Reads startup-phase packets and then typed frames from a socket, with a deadline for the whole phase. */
class StartupStream {
  #startup = new StartupReader();
  #frames = new FrameReader({ maxFrameLength: FRONTEND_MAX_FRAME_LENGTH });
  #pendingFrames: Frame[] = [];
  #waiter: (() => void) | null = null;
  #closed = false;
  #mode: "startup" | "frames" = "startup";
  #packets: StartupPacket[] = [];
  /** A malformed frame (bad length word) ends the startup; thrown by the next `nextFrame`. */
  #failure: Error | undefined;

  constructor(public socket: Socket) {
    this.#attach(socket);
  }

  readonly #onData = (chunk: Buffer): void => {
    if (this.#mode === "startup") {
      const packet = this.#startup.feed(chunk);
      if (packet.kind !== "incomplete") this.#packets.push(packet);
    } else {
      this.#feedFrames(chunk);
    }
    this.#wake();
  };

  readonly #onClose = (): void => {
    this.#closed = true;
    this.#wake();
  };

  #attach(socket: Socket): void {
    socket.on("data", this.#onData);
    socket.on("close", this.#onClose);
  }

  /** Removes only our listeners: others (the server's bookkeeping of open sockets) stay. */
  #release(socket: Socket): void {
    socket.removeListener("data", this.#onData);
    socket.removeListener("close", this.#onClose);
  }

  #feedFrames(chunk: Buffer): void {
    try {
      // Copies: the frames outlive this chunk.
      this.#frames.feed(chunk, ({ code, payload, frame }) =>
        this.#pendingFrames.push({ code, payload: Buffer.from(payload), frame: Buffer.from(frame) }),
      );
    } catch (error) {
      this.#failure ??= error as Error;
    }
  }

  #wake(): void {
    const waiter = this.#waiter;
    this.#waiter = null;
    waiter?.();
  }

  async #until<T>(take: () => T | undefined): Promise<T> {
    for (;;) {
      const value = take();
      if (value !== undefined) return value;
      if (this.#failure) {
        throw new StartupRefusal(SqlState.protocolViolation, this.#failure.message, "protocol");
      }
      if (this.#closed)
        throw new StartupRefusal(
          SqlState.protocolViolation,
          "the client closed the connection during startup",
          "client_gone",
        );
      await new Promise<void>((resolve) => (this.#waiter = resolve));
    }
  }

  nextPacket(): Promise<StartupPacket> {
    return this.#until(() => this.#packets.shift());
  }

  /** Switches to typed messages (after the StartupMessage), keeping bytes that came with it. */
  startFrames(rest: Buffer): void {
    this.#mode = "frames";
    if (rest.length > 0) this.#feedFrames(rest);
  }

  nextFrame(): Promise<Frame> {
    return this.#until(() => this.#pendingFrames.shift());
  }

  /** Whether the client's socket closed (a paused socket notices only once it is read again). */
  get closed(): boolean {
    return this.#closed || this.socket.destroyed;
  }

  /** Continues on a TLS socket wrapped around the same TCP connection. */
  upgrade(secure: TLSSocket): void {
    this.#release(this.socket);
    this.socket = secure;
    this.#startup = new StartupReader();
    this.#attach(secure);
  }

  /** Frames already read past the password message, for the relay. */
  detach(): Frame[] {
    this.#release(this.socket);
    this.socket.pause();
    return this.#pendingFrames.splice(0);
  }
}

/**
 * One client connection, start to end: encryption negotiation, startup, agent authentication, upstream
 * session, then the metered relay. Any refusal before the relay is a FATAL ErrorResponse and a close.
 */
export async function runClientSession(raw: Socket, ctx: ProxyContext): Promise<void> {
  raw.setNoDelay(true);
  raw.on("error", () => {});
  const stream = new StartupStream(raw);
  const deadline = setTimeout(() => {
    ctx.metrics.sessionsRefused.labels("startup_timeout").inc();
    stream.socket.destroy();
  }, ctx.startupTimeoutMs);
  let releaseSlot: (() => void) | undefined;
  try {
    const startup = await negotiate(stream, ctx);
    if (!startup) return;
    const request = parseSessionRequest(startup.params);
    if (startup.protocol.minor > 0 || Object.keys(startup.protocolOptions).length > 0) {
      stream.socket.write(encodeNegotiateProtocolVersion(0, Object.keys(startup.protocolOptions)));
    }
    stream.startFrames(startup.rest);

    if (!(stream.socket instanceof TLSSocket) && !isLoopback(raw.remoteAddress)) {
      throw new StartupRefusal(
        SqlState.invalidAuthorization,
        "pgtoll accepts agent tokens only over TLS or from loopback",
        "tls_required",
        "connect with sslmode=require",
      );
    }
    stream.socket.write(encodeAuthenticationCleartextPassword());
    const answer = await stream.nextFrame();
    // Nothing more is read until the relay starts: a client cannot make us buffer while it waits for a slot.
    stream.socket.pause();
    if (answer.code !== FrontendCode.PasswordMessage) {
      throw new StartupRefusal(SqlState.protocolViolation, "expected a password message", "protocol");
    }
    const token = decodePasswordMessage(answer.payload);
    const check = await verifyAgentToken(token, request.agentWallet, request.providerId);
    if (!check.ok) {
      throw new StartupRefusal(
        SqlState.invalidPassword,
        `password authentication failed for wallet ${request.agentWallet}: ${check.reason}`,
        "bad_token",
      );
    }

    const found = await findProviderForQuery(ctx.db, request.providerId);
    if (!found)
      throw new StartupRefusal(
        SqlState.invalidCatalogName,
        `provider ${request.providerId} does not exist`,
        "unknown_provider",
      );
    if (!found.pricing)
      throw new StartupRefusal(
        SqlState.connectionRejected,
        `provider ${request.providerId} has not set its pricing yet`,
        "no_pricing",
      );

    try {
      releaseSlot = await ctx.slots.acquire(request.providerId);
    } catch (error) {
      if (error instanceof SlotTimeoutError)
        throw new StartupRefusal(SqlState.tooManyConnections, error.message, "pool_timeout");
      throw error;
    }
    const target = parseUpstreamTarget(ctx.box.open(found.provider.connectionSecret));
    let upstream: Awaited<ReturnType<typeof connectUpstream>>;
    try {
      upstream = await connectUpstream(
        target,
        {
          application_name: request.applicationName || "pgtoll",
          client_encoding: "UTF8",
          statement_timeout: String(ctx.statementTimeoutMs),
          ...request.settings,
        },
        ctx.startupTimeoutMs,
      );
    } catch (error) {
      if (error instanceof UpstreamStartupError)
        throw new StartupRefusal(error.sqlState, error.message, "upstream");
      throw error;
    }
    clearTimeout(deadline);
    if (stream.closed) {
      upstream.socket.end(encodeTerminate());
      upstream.socket.destroy();
      const message = "the client closed the connection during startup";
      throw new StartupRefusal(SqlState.protocolViolation, message, "client_gone");
    }
    const client = stream.socket;
    const early = stream.detach();
    const slot = releaseSlot;
    releaseSlot = undefined;
    startRelay(client, upstream, request.agentWallet, request.providerId, found.pricing, ctx, early, slot);
  } catch (error) {
    clearTimeout(deadline);
    releaseSlot?.();
    // Read on, or the client's own close would never be noticed and the socket would stay open.
    stream.socket.resume();
    const refusal =
      error instanceof StartupRefusal
        ? error
        : new StartupRefusal(
            SqlState.protocolViolation,
            `invalid startup: ${(error as Error).message}`,
            "protocol",
          );
    if (refusal.reason !== "client_gone") {
      ctx.logger.debug({ reason: refusal.reason, err: error }, "session refused");
      stream.socket.end(
        errorFrame(refusal.sqlState, refusal.message, {
          fatal: true,
          ...(refusal.hint ? { hint: refusal.hint } : {}),
        }),
      );
    }
    ctx.metrics.sessionsRefused.labels(refusal.reason).inc();
  }
}

type StartupMessage = Extract<StartupPacket, { kind: "startup" }>;

/** SSL and GSS negotiation and cancel requests, up to the StartupMessage; null when the connection is done. */
async function negotiate(stream: StartupStream, ctx: ProxyContext): Promise<StartupMessage | null> {
  for (;;) {
    const packet = await stream.nextPacket();
    switch (packet.kind) {
      case "sslRequest":
      case "gssencRequest":
        // Bytes sent before the encryption handshake could be injected by a man in the middle (CVE-2021-23214).
        if (packet.rest.length > 0)
          throw new StartupRefusal(
            SqlState.protocolViolation,
            "unexpected data after an encryption request",
            "protocol",
          );
        if (packet.kind === "gssencRequest" || !ctx.tls) {
          stream.socket.write(
            packet.kind === "gssencRequest" ? encodeGSSENCResponse(false) : encodeSSLResponse(false),
          );
          continue;
        }
        stream.socket.write(encodeSSLResponse(true));
        await upgradeToTls(stream, ctx.tls);
        continue;
      case "cancelRequest":
        ctx.registry.cancel(packet.processId, packet.secretKey);
        stream.socket.end();
        return null;
      case "startup":
        return packet;
      case "unsupportedProtocol":
        throw new StartupRefusal(
          SqlState.featureNotSupported,
          `unsupported frontend protocol ${packet.protocol.major}.${packet.protocol.minor}: pgtoll speaks 3.0`,
          "protocol_version",
        );
      case "tlsHandshake":
        throw new StartupRefusal(
          SqlState.protocolViolation,
          "direct TLS is not supported; use sslnegotiation=postgres",
          "protocol",
        );
      case "malformed":
        throw new StartupRefusal(SqlState.protocolViolation, packet.reason, "protocol");
      default:
        throw new StartupRefusal(SqlState.protocolViolation, "unexpected startup packet", "protocol");
    }
  }
}

function upgradeToTls(stream: StartupStream, secureContext: SecureContext): Promise<void> {
  return new Promise((resolve, reject) => {
    const secure = new TLSSocket(stream.socket, { isServer: true, secureContext });
    secure.on("error", () => {});
    stream.upgrade(secure);
    secure.once("secure", () => resolve());
    secure.once("error", (error) =>
      reject(new StartupRefusal(SqlState.protocolViolation, `TLS handshake failed: ${error.message}`, "tls")),
    );
  });
}

function startRelay(
  client: Socket,
  upstream: Awaited<ReturnType<typeof connectUpstream>>,
  agentWallet: string,
  providerId: string,
  price: { priceMicroPer1000Rows: bigint; markupPpm: bigint },
  ctx: ProxyContext,
  early: Frame[],
  releaseSlot: () => void,
): void {
  const meter = new SessionMeter(ctx.db, ctx.chargeWriter, agentWallet, providerId, price, {
    reserveRows: ctx.reserveRows,
    reservationTtlSeconds: ctx.reservationTtlSeconds,
    onCharge: (cost) => ctx.metrics.chargedMicro.inc(Number(cost)),
  });
  const key = ctx.registry.register(() => {
    void sendCancelRequest(
      upstream.target.host,
      upstream.target.port,
      upstream.processId,
      upstream.secretKey,
    );
  });
  upstream.socket.on("error", () => {});
  const log = ctx.logger.child({ session: key.processId, providerId });
  let ended = false;
  let settled: () => void = () => {};
  const relay: Relay = new Relay({
    client,
    upstream: upstream.socket,
    meter,
    metrics: ctx.metrics,
    logger: log,
    check: ctx.check,
    status: upstream.status,
    idleReleaseMs: ctx.idleReleaseMs,
    drainTimeoutMs: ctx.statementTimeoutMs + 5000,
    cancelUpstream: () =>
      void sendCancelRequest(
        upstream.target.host,
        upstream.target.port,
        upstream.processId,
        upstream.secretKey,
      ),
    onEnd: (reason) => {
      if (ended) return;
      ended = true;
      log.debug({ reason }, "session ended");
      key.unregister();
      ctx.metrics.sessionsActive.dec();
      if (!upstream.socket.destroyed) upstream.socket.end(encodeTerminate());
      upstream.socket.destroy();
      client.end();
      releaseSlot();
      const release = meter
        .release()
        .catch((error) => log.error({ err: error }, "could not release the session's reservation"));
      ctx.releases.add(release);
      void release.finally(() => ctx.releases.delete(release));
      settled();
    },
  });
  client.on("close", () => {
    relay.clientGone();
    // A session still settling what its client left upstream is waited for at shutdown, like a release.
    if (ended) return;
    const settling = new Promise<void>((resolve) => (settled = resolve));
    ctx.releases.add(settling);
    void settling.then(() => ctx.releases.delete(settling));
  });
  upstream.socket.on("close", () => {
    if (!ended && !client.destroyed && !relay.closing) {
      client.write(
        errorFrame(SqlState.connectionFailure, "the provider's database closed the connection", {
          fatal: true,
        }),
      );
    }
    relay.end("upstream closed");
  });
  ctx.metrics.sessionsActive.inc();
  ctx.metrics.sessionsTotal.inc();

  const hello: Buffer[] = [encodeAuthenticationOk()];
  for (const [name, value] of upstream.parameters) hello.push(encodeParameterStatus(name, value));
  hello.push(encodeBackendKeyData(key.processId, key.secretKey), encodeReadyForQuery(upstream.status));
  client.write(Buffer.concat(hello));
  relay.start(early);
}
