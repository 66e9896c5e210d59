import { forgetEndpointSessions, recordEndpointSession } from "../control/endpoint-session-records.js";
import { addressAllowed, ipNotAllowedMessage } from "../control/ip-allowlist.js";
import {
  type EndpointConnection,
  type EndpointRefusalReason,
  resolveEndpoint,
} from "../control/resolve-endpoint.js";
import { SqlState } from "../db/sql-state.js";
import type { EndpointRouting, ProxyContext } from "./proxy-context.js";
import { StartupRefusal } from "./proxy-errors.js";
import { passwordFailed } from "./session-auth.js";
import type { EndpointRequest } from "./startup-options.js";

export type EndpointContext = ProxyContext & { endpoints: EndpointRouting };

/** SQLSTATE of each reason an endpoint refuses a connection after the password was right. */
const REFUSAL_CODES: Record<EndpointRefusalReason, string> = {
  suspended: SqlState.cannotConnectNow,
  disabled: SqlState.cannotConnectNow,
  starting: SqlState.cannotConnectNow,
  branch_not_ready: SqlState.cannotConnectNow,
  unknown_role: SqlState.invalidPassword,
  no_login: SqlState.invalidAuthorization,
  unknown_database: SqlState.invalidCatalogName,
};

/** The FATAL answer to a connection `resolveEndpoint` refused. */
export function endpointRefusal(connection: EndpointConnection): StartupRefusal {
  const reason = connection.refusal?.reason ?? "unknown_role";
  return new StartupRefusal(
    REFUSAL_CODES[reason],
    connection.refusal?.message ?? "refused",
    `endpoint_${reason}`,
  );
}

/**
 * The endpoint and what its session needs, before any password is checked: a client the project's IP allowlist
 * refuses learns nothing about the role or its password (28000, as PostgreSQL refuses a host pg_hba does not
 * list, with Neon's message).
 */
export async function findEndpoint(
  request: EndpointRequest,
  endpointId: string,
  ctx: EndpointContext,
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

/**
 * Lets in a session whose upstream backend is up, or refuses it. The backend is recorded first (see
 * endpoint-session-records.ts), then the endpoint is looked at again. Whatever takes access away (a suspend, a
 * deletion, a new password, an allowlist) commits its change and then ends the recorded sessions: either it
 * read this record and ends the backend, or it committed before the second look, which then sees the change
 * and refuses. So no session slips in between. Returns what forgets the record once the session has ended.
 */
export async function admitEndpointSession(
  request: EndpointRequest,
  connection: EndpointConnection,
  ctx: EndpointContext,
  clientAddress: string,
  backendPid: number,
): Promise<() => Promise<void>> {
  const upstream = connection.upstream!;
  const id = await recordEndpointSession(ctx.db, ctx.endpoints.cluster, {
    endpointId: connection.endpointId,
    projectId: connection.projectId,
    branchId: connection.branchId,
    physicalRole: upstream.user,
    physicalDatabase: upstream.database,
    clientAddress,
    backendPid,
  });
  if (id === null) {
    const message = `the session to endpoint ${connection.endpointId} was ended while it started`;
    throw new StartupRefusal(SqlState.adminShutdown, message, "ended_at_start");
  }
  const forget = () => forgetEndpointSessions(ctx.db, [id]);
  try {
    const again = await findEndpoint(request, connection.endpointId, ctx, clientAddress);
    if (again.refusal || !again.upstream) throw endpointRefusal(again);
    if (again.rolePassword !== connection.rolePassword) throw passwordFailed(request.role);
    if (
      again.branchId !== connection.branchId ||
      again.readOnly !== connection.readOnly ||
      again.upstream.user !== upstream.user ||
      again.upstream.database !== upstream.database
    ) {
      const message = `endpoint ${connection.endpointId} changed while the session started: connect again`;
      throw new StartupRefusal(SqlState.cannotConnectNow, message, "endpoint_changed");
    }
  } catch (error) {
    await forget();
    throw error;
  }
  return forget;
}
