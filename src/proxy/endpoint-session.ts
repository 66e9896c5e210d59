import type { Socket } from "node:net";
import { addressAllowed, ipNotAllowedMessage } from "../control/ip-allowlist.js";
import {
  type EndpointConnection,
  type EndpointRefusalReason,
  passwordMatches,
  recordEndpointActivity,
  resolveEndpoint,
} from "../control/resolve-endpoint.js";
import { findReadOnlySettingViolation, loadGuard } from "../guard/index.js";
import { EndpointRelay } from "./endpoint-relay.js";
import type { Frame } from "./frame-reader.js";
import type { EndpointRouting, ProxyContext } from "./proxy-context.js";
import { SqlState, StartupRefusal } from "./proxy-errors.js";
import { authenticateWithScram, passwordFailed, readCleartextPassword } from "./session-auth.js";
import { registerCancelKey, type SessionPlan, welcomeMessage } from "./session-plan.js";
import type { EndpointRequest } from "./startup-options.js";
import type { StartupStream } from "./startup-stream.js";
import { parseUpstreamTarget, type UpstreamSession } from "./upstream-connection.js";

/** SQLSTATE of each reason an endpoint refuses a connection after the password was right. */
const REFUSAL_CODES: Record<EndpointRefusalReason, string> = {
  suspended: "57P03", // cannot_connect_now
  disabled: "57P03",
  starting: "57P03",
  branch_not_ready: "57P03",
  unknown_role: SqlState.invalidPassword,
  no_login: SqlState.invalidAuthorization,
  unknown_database: SqlState.invalidCatalogName,
};

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
 * session logs in to the branch's database as the role's real PostgreSQL role, tagged with the endpoint's
 * application_name (suspending or deleting the endpoint ends it). Read-only endpoints start it with
 * `default_transaction_read_only=on` and relay through {@link EndpointRelay}'s read-only checks; read_write
 * endpoints relay bytes as they are, unmetered (the database is the owner's own).
 */
export async function planEndpointSession(
  request: EndpointRequest,
  stream: StartupStream,
  ctx: ProxyContext & { endpoints: EndpointRouting },
  /** The client's address as the proxy's socket sees it (the TCP peer: the wire proxy has no forwarding header). */
  clientAddress: string,
): Promise<SessionPlan> {
  const find = (endpointId: string) => findEndpoint(request, endpointId, ctx, clientAddress);
  const connection = request.endpointId
    ? await authenticateWithScramFor(request, find(request.endpointId), stream)
    : await authenticateWithEndpointPassword(request, find, stream);
  if (connection.refusal || !connection.upstream) {
    const reason = connection.refusal?.reason ?? "unknown_role";
    throw new StartupRefusal(
      REFUSAL_CODES[reason],
      connection.refusal?.message ?? "refused",
      `endpoint_${reason}`,
    );
  }
  const settings = { ...request.settings };
  if (connection.readOnly) {
    await loadGuard();
    for (const [name, value] of Object.entries(settings)) {
      const denial = findReadOnlySettingViolation(name, value);
      if (denial) throw new StartupRefusal("25006", denial.message, "read_only_setting");
    }
  }
  await recordEndpointActivity(ctx.db, connection.endpointId);
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
      application_name: connection.applicationName,
      ...(connection.readOnly ? { default_transaction_read_only: "on" } : {}),
    },
    // The owner's own branch role, created by the management plane without superuser.
    refuseSuperuser: false,
    start: (client, upstream, early, releaseSlot) =>
      startEndpointRelay(client, upstream, connection, ctx, early, releaseSlot),
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

/**
 * The endpoint and what its session needs, before any password is checked: a client the project's IP allowlist
 * refuses learns nothing about the role or its password (28000, as PostgreSQL refuses a host pg_hba does not
 * list, with Neon's message).
 */
async function findEndpoint(
  request: EndpointRequest,
  endpointId: string,
  ctx: ProxyContext & { endpoints: EndpointRouting },
  clientAddress: string,
): Promise<EndpointConnection> {
  const connection = await resolveEndpoint(ctx.db, ctx.box, ctx.endpoints.clusterUrl, endpointId, {
    role: request.role,
    database: request.database,
  });
  if (!connection) {
    throw new StartupRefusal(
      SqlState.connectionRejected,
      `endpoint ${endpointId} does not exist`,
      "unknown_endpoint",
    );
  }
  if (!addressAllowed(connection.ipAllowlist, connection.branchProtected, clientAddress))
    throw new StartupRefusal(
      SqlState.invalidAuthorization,
      ipNotAllowedMessage(clientAddress),
      "ip_not_allowed",
    );
  return connection;
}

function startEndpointRelay(
  client: Socket,
  upstream: UpstreamSession,
  connection: EndpointConnection,
  ctx: ProxyContext,
  early: Frame[],
  releaseSlot: () => void,
): void {
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
    },
  });
  client.write(welcomeMessage(upstream, key));
  relay.start(early);
}
