import type { Socket } from "node:net";
import { TLSSocket } from "node:tls";
import { endpointIdFromHost } from "../control/resolve-endpoint.js";
import { SqlState } from "../db/sql-state.js";
import { PROVIDER_ROLE_DOCS, SUPERUSER_UPSTREAM_REFUSAL } from "../providers/provider-role.js";
import { type AuthenticatedAgent, notThisAgent, planAgentSession } from "./agent-session.js";
import { planEndpointSession } from "./endpoint-session.js";
import { isLoopback } from "./loopback.js";
import type { ProxyContext } from "./proxy-context.js";
import { errorFrame, StartupRefusal, UnansweredClose } from "./proxy-errors.js";
import { closeRefused } from "./refused-socket.js";
import { encodeNegotiateProtocolVersion, encodeTerminate } from "./serializer.js";
import { readCleartextPassword } from "./session-auth.js";
import { restartFarewell } from "./session-drain.js";
import type { SessionPlan } from "./session-plan.js";
import { negotiate } from "./startup-negotiation.js";
import { isEndpointStartup, parseEndpointRequest, parseSessionRequest } from "./startup-options.js";
import { StartupStream } from "./startup-stream.js";
import { connectUpstream, type UpstreamSession, UpstreamStartupError } from "./upstream-connection.js";
import { SlotTimeoutError } from "./upstream-slots.js";

export type { ProxyContext } from "./proxy-context.js";

/**
 * One client connection, start to end: encryption negotiation, startup, authentication (an agent token, or a
 * branch role's password for a management API endpoint), the upstream session, then the session's relay.
 * A refusal before the relay is a FATAL ErrorResponse and a close, or a close without a word where PostgreSQL
 * says nothing either (UnansweredClose); a refused socket is gone within a second (closeRefused).
 */
export async function runClientSession(
  raw: Socket,
  ctx: ProxyContext,
  /** The client's address: the socket's peer, or what a trusted balancer's PROXY header said. */
  clientAddress: string | undefined = raw.remoteAddress,
  /**
   * Only for a connection pgtoll made within its own process: the agent its caller already authenticated. The
   * session asks for no password and serves that agent alone (any other startup is refused). Never set it for a
   * socket a client opened.
   */
  authenticatedAgent?: AuthenticatedAgent,
): Promise<void> {
  raw.setNoDelay(true);
  raw.on("error", () => {});
  const authenticated = ctx.unauthenticated.admit(clientAddress, () => {
    ctx.metrics.sessionsRefused.labels("evicted").inc();
    stream.socket.destroy();
  });
  if (!authenticated) {
    refuseTooManyFrom(raw, ctx, clientAddress);
    return;
  }
  raw.once("close", authenticated);
  const stream = new StartupStream(raw);
  // A stopping server whose grace is over ends a connection still starting up as PostgreSQL would a session,
  // with FATAL 57P01, rather than close it without a word (the session, once started, joins the drain itself).
  const leaveDrain =
    ctx.drain?.add({
      endWhenIdle: () => {},
      endNow: () => {
        ctx.metrics.sessionsRefused.labels("restarting").inc();
        closeRefused(stream.socket, restartFarewell());
      },
    }) ?? (() => {});
  const deadline = setTimeout(() => {
    ctx.metrics.sessionsRefused.labels("startup_timeout").inc();
    stream.socket.destroy();
  }, ctx.startupTimeoutMs);
  let releaseSlot: (() => void) | undefined;
  try {
    const startup = await negotiate(stream, ctx);
    if (!startup) {
      clearTimeout(deadline);
      stream.abandon();
      closeRefused(stream.socket);
      return;
    }
    const endpoints = ctx.endpoints;
    const serverName = stream.serverName;
    const namedEndpoint =
      endpoints && serverName ? endpointIdFromHost(serverName, endpoints.proxyHost) : null;
    const endpointRequest =
      endpoints && isEndpointStartup(startup.params, namedEndpoint)
        ? parseEndpointRequest(startup.params, namedEndpoint)
        : undefined;
    // An agent's startup is checked before the password is asked for: a bad one is refused at once.
    const agentRequest = endpointRequest ? undefined : parseSessionRequest(startup.params);
    if (startup.protocol.minor > 0 || Object.keys(startup.protocolOptions).length > 0) {
      stream.socket.write(encodeNegotiateProtocolVersion(0, Object.keys(startup.protocolOptions)));
    }
    stream.startMessages(startup.rest);

    if (!(stream.socket instanceof TLSSocket) && !isLoopback(clientAddress)) {
      throw new StartupRefusal(
        SqlState.invalidAuthorization,
        `pgtoll accepts ${endpointRequest ? "passwords" : "agent tokens"} only over TLS or from loopback`,
        "tls_required",
        "connect with sslmode=require",
      );
    }
    if (authenticatedAgent && !agentRequest) throw notThisAgent(authenticatedAgent, "an endpoint");
    const plan: SessionPlan =
      endpointRequest && endpoints
        ? await planEndpointSession(endpointRequest, stream, { ...ctx, endpoints }, clientAddress ?? "")
        : await planAgentSession(
            agentRequest!,
            authenticatedAgent
              ? { authenticated: authenticatedAgent }
              : { token: await readCleartextPassword(stream) },
            ctx,
            clientAddress,
          );
    authenticated();

    releaseSlot = await acquireSlot(ctx, plan.slotKey);
    const upstream = await openUpstream(plan, ctx);
    clearTimeout(deadline);
    if (stream.closed) {
      upstream.socket.end(encodeTerminate());
      upstream.socket.destroy();
      throw new UnansweredClose("the client closed the connection during startup", "client_gone");
    }
    const client = stream.socket;
    stream.detach();
    const slot = releaseSlot;
    releaseSlot = undefined;
    plan.start(client, upstream, [], slot);
  } catch (error) {
    clearTimeout(deadline);
    releaseSlot?.();
    stream.abandon();
    refuse(stream.socket, error, ctx, clientAddress);
  } finally {
    leaveDrain();
  }
}

/** Ends a connection that will not be served: with a FATAL saying why, or without a word (UnansweredClose). */
function refuse(socket: Socket, error: unknown, ctx: ProxyContext, client: string | undefined): void {
  if (error instanceof UnansweredClose && error.reason === "untrusted_proxy_header") {
    ctx.logger.warn(
      { client },
      `closed a connection from ${client}: a PROXY protocol header from a peer not in PGTOLL_TRUSTED_PROXIES`,
    );
    ctx.metrics.proxyHeaders.labels("untrusted").inc();
  }
  if (error instanceof UnansweredClose) {
    ctx.logger.debug({ reason: error.reason, client, err: error }, "connection closed during startup");
    ctx.metrics.sessionsRefused.labels(error.reason).inc();
    closeRefused(socket);
    return;
  }
  const refusal =
    error instanceof StartupRefusal
      ? error
      : new StartupRefusal(
          SqlState.protocolViolation,
          `invalid startup: ${(error as Error).message}`,
          "protocol",
        );
  ctx.logger.debug({ reason: refusal.reason, client, err: error }, "session refused");
  ctx.metrics.sessionsRefused.labels(refusal.reason).inc();
  closeRefused(
    socket,
    errorFrame(refusal.sqlState, refusal.message, {
      fatal: true,
      ...(refusal.hint ? { hint: refusal.hint } : {}),
    }),
  );
}

/** An address already has its fill of connections authenticating: refused before a byte of this one is read. */
function refuseTooManyFrom(raw: Socket, ctx: ProxyContext, client: string | undefined): void {
  ctx.metrics.sessionsRefused.labels("too_many_unauthenticated").inc();
  const limit = ctx.unauthenticated.limits.perAddress;
  const from = client ?? "this address";
  const message = `too many connections from ${from} are authenticating (at most ${limit} at once)`;
  closeRefused(raw, errorFrame(SqlState.tooManyConnections, message, { fatal: true }));
}

async function acquireSlot(ctx: ProxyContext, key: string): Promise<() => void> {
  try {
    return await ctx.slots.acquire(key);
  } catch (error) {
    if (error instanceof SlotTimeoutError)
      throw new StartupRefusal(SqlState.tooManyConnections, error.message, "pool_timeout");
    throw error;
  }
}

async function openUpstream(plan: SessionPlan, ctx: ProxyContext): Promise<UpstreamSession> {
  let upstream: UpstreamSession;
  try {
    upstream = await connectUpstream(plan.target, plan.parameters, ctx.startupTimeoutMs);
  } catch (error) {
    if (error instanceof UpstreamStartupError)
      throw new StartupRefusal(error.sqlState, error.message, "upstream");
    throw error;
  }
  if (plan.refuseSuperuser && upstream.parameters.get("is_superuser") === "on") {
    upstream.socket.destroy();
    throw new StartupRefusal(
      SqlState.connectionRejected,
      `${SUPERUSER_UPSTREAM_REFUSAL} (${PROVIDER_ROLE_DOCS})`,
      "privileged_upstream",
    );
  }
  return upstream;
}
