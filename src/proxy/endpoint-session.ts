import type { Socket } from "node:net";
import { type EndpointConnection, passwordMatches } from "../control/resolve-endpoint.js";
import { SqlState } from "../db/sql-state.js";
import { findReadOnlySettingViolation, loadGuard } from "../guard/index.js";
import {
  admitEndpointSession,
  type EndpointContext,
  endpointRefusal,
  findEndpoint,
} from "./endpoint-admission.js";
import { EndpointRelay } from "./endpoint-relay.js";
import type { Frame } from "./frame-reader.js";
import { errorFrame, StartupRefusal } from "./proxy-errors.js";
import { encodeTerminate } from "./serializer.js";
import { authenticateWithScram, passwordFailed, readCleartextPassword } from "./session-auth.js";
import { registerCancelKey, type SessionPlan, welcomeMessage } from "./session-plan.js";
import type { EndpointRequest } from "./startup-options.js";
import type { StartupStream } from "./startup-stream.js";
import { parseUpstreamTarget, type UpstreamSession } from "./upstream-connection.js";

/**
 * Neon's fallback for clients that can send neither SNI nor `options`: the password field carries
 * `endpoint=<id>;<password>` (or `endpoint=<id>$<password>`).
 */
export function splitEndpointPassword(password: string): { endpointId: string; password: string } | null {
  const match = /^endpoint=([A-Za-z0-9-]+)[;$]([\s\S]*)$/.exec(password);
  return match ? { endpointId: match[1]!.toLowerCase(), password: match[2]! } : null;
}

/**
 * A session to a management API endpoint, authenticated with the branch role's password. The upstream
 * session logs in to the branch's database as the role's real PostgreSQL role, with the client's own
 * application_name; once it is up, its backend is recorded (endpoint-admission.ts), which is how whatever
 * takes access away finds and ends it. Read-only endpoints start it with `default_transaction_read_only=on`
 * and relay through {@link EndpointRelay}'s read-only checks; read_write endpoints relay bytes as they are,
 * unmetered (the database is the owner's own).
 */
export async function planEndpointSession(
  request: EndpointRequest,
  stream: StartupStream,
  ctx: EndpointContext,
  /** The client's address: the TCP peer, or what a trusted load balancer's PROXY header carried. */
  clientAddress: string,
): Promise<SessionPlan> {
  const find = (endpointId: string) => findEndpoint(request, endpointId, ctx, clientAddress);
  const connection = request.endpointId
    ? await authenticateWithScramFor(request, find(request.endpointId), stream)
    : await authenticateWithEndpointPassword(request, find, stream);
  if (connection.refusal || !connection.upstream) throw endpointRefusal(connection);
  const settings = { ...request.settings };
  if (connection.readOnly) {
    await loadGuard();
    for (const [name, value] of Object.entries(settings)) {
      const denial = findReadOnlySettingViolation(name, value);
      if (denial) throw new StartupRefusal(SqlState.readOnlyTransaction, denial.message, "read_only_setting");
    }
  }
  const { host, port, database, user, password: upstreamPassword } = connection.upstream;
  return {
    slotKey: `endpoint:${connection.endpointId}`,
    target: {
      ...parseUpstreamTarget(ctx.endpoints.clusterUrl),
      host,
      port,
      database,
      user,
      password: upstreamPassword,
    },
    parameters: {
      ...settings,
      ...(connection.readOnly ? { default_transaction_read_only: "on" } : {}),
    },
    // The owner's own branch role, created by the management plane without superuser.
    refuseSuperuser: false,
    start: (client, upstream, early, releaseSlot) => {
      const admission = admitEndpointSession(request, connection, ctx, clientAddress, upstream.processId);
      startEndpointRelay({ client, upstream, connection, ctx, early, releaseSlot }, admission);
    },
  };
}

/** The endpoint is known from the startup: SCRAM (with channel binding on TLS) against the role's password. */
async function authenticateWithScramFor(
  request: EndpointRequest,
  found: Promise<EndpointConnection>,
  stream: StartupStream,
): Promise<EndpointConnection> {
  const connection = await found;
  await authenticateWithScram(stream, connection.rolePassword, request.role);
  return connection;
}

/** Neon's fallback: the endpoint comes with the password, which is then sent in clear (TLS or loopback only). */
async function authenticateWithEndpointPassword(
  request: EndpointRequest,
  find: (endpointId: string) => Promise<EndpointConnection>,
  stream: StartupStream,
): Promise<EndpointConnection> {
  const split = splitEndpointPassword(await readCleartextPassword(stream));
  if (!split) {
    throw new StartupRefusal(
      SqlState.connectionRejected,
      "no endpoint given: connect to <endpoint_id>.<proxy host> with TLS (SNI), or add options=endpoint%3D<endpoint_id> to the connection string, or send the password as endpoint=<endpoint_id>;<password>",
      "no_endpoint",
    );
  }
  const connection = await find(split.endpointId);
  if (!passwordMatches(connection, split.password)) throw passwordFailed(request.role);
  return connection;
}

interface StartedSession {
  client: Socket;
  upstream: UpstreamSession;
  connection: EndpointConnection;
  ctx: EndpointContext;
  early: Frame[];
  releaseSlot: () => void;
}

/** Relays the session once `admission` lets it in; refuses it (FATAL) otherwise. */
function startEndpointRelay(session: StartedSession, admission: Promise<() => Promise<void>>): void {
  const { client, upstream, connection, ctx, early, releaseSlot } = session;
  upstream.socket.on("error", () => {});
  admission
    .then(
      (forget) => {
        const key = registerCancelKey(ctx.registry, upstream);
        const log = ctx.logger.child({ session: key.processId, endpointId: connection.endpointId });
        const relay = new EndpointRelay({
          client,
          upstream: upstream.socket,
          endpointId: connection.endpointId,
          readOnly: connection.readOnly,
          onEnd: (reason) => {
            log.debug({ reason }, "endpoint session ended");
            key.unregister();
            releaseSlot();
            forget().catch((error) => log.warn({ err: error }, "could not forget the endpoint session"));
          },
        });
        client.write(welcomeMessage(upstream, key));
        relay.start(early);
      },
      (error: unknown) => {
        const refusal =
          error instanceof StartupRefusal
            ? error
            : new StartupRefusal(
                SqlState.connectionFailure,
                `the session to endpoint ${connection.endpointId} could not be recorded: ${(error as Error).message}`,
                "record_failed",
              );
        ctx.logger.debug({ reason: refusal.reason, err: error }, "session refused");
        ctx.metrics.sessionsRefused.labels(refusal.reason).inc();
        upstream.socket.end(encodeTerminate());
        releaseSlot();
        client.resume();
        client.end(errorFrame(refusal.sqlState, refusal.message, { fatal: true }));
      },
    )
    .catch((error: unknown) => {
      ctx.logger.error({ err: error }, "endpoint session failed to start");
      client.destroy();
      upstream.socket.destroy();
    });
}
