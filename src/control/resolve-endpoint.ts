import { createHash, timingSafeEqual } from "node:crypto";
import type { SecretBox } from "../providers/secret-box.js";
import { allowlistOf, type IpAllowlist } from "./ip-allowlist.js";
import type { EndpointState, EndpointType } from "./rows.js";
import type { Queryable } from "./sql.js";

/** Why a connection to an endpoint must be refused; `message` is meant for the client. */
export type EndpointRefusalReason =
  | "suspended"
  | "disabled"
  | "starting"
  | "branch_not_ready"
  | "unknown_role"
  | "no_login"
  | "unknown_database";

export interface EndpointConnection {
  endpointId: string;
  projectId: string;
  branchId: string;
  type: EndpointType;
  /** read_only endpoints must refuse writes (start the upstream session with default_transaction_read_only=on). */
  readOnly: boolean;
  state: EndpointState;
  disabled: boolean;
  /**
   * The role's password when the role exists on the branch and has one. Check the client's password against it
   * (`passwordMatches`) before saying anything else about the endpoint, the role or the database.
   */
  rolePassword: string | null;
  /** null when the client may connect; otherwise refuse with this message (and do not say whether the role exists). */
  refusal: { reason: EndpointRefusalReason; message: string } | null;
  /**
   * Where and as whom to open the upstream session, when `refusal` is null. `password` is the role's password:
   * check the client's against it (`passwordMatches`, or a SCRAM exchange), then log in upstream with it.
   */
  upstream: { host: string; port: number; database: string; user: string; password: string } | null;
  /** The project's `settings.allowed_ips`, null when it restricts nothing; see `addressAllowed`. */
  ipAllowlist: IpAllowlist | null;
  branchProtected: boolean;
}

/**
 * For the wire proxy: what a client connecting to `endpointId` (from `options=endpoint=<id>` or the TLS server
 * name, see `endpointIdFromHost`) as `login.role` to `login.database` should be connected to, or why it must
 * be refused. Returns null for an unknown endpoint. The names the client uses are the API's (`neondb_owner`,
 * `neondb`); the upstream ones are the real role and database on the cluster that hosts projects.
 */
export async function resolveEndpoint(
  db: Queryable,
  box: SecretBox,
  clusterUrl: string,
  endpointId: string,
  login: { role: string; database: string },
): Promise<EndpointConnection | null> {
  const { rows } = await db.query(
    `SELECT e.id, e.project_id, e.branch_id, e.type, e.current_state, e.disabled, b.current_state AS branch_state,
       b.protected AS branch_protected, (SELECT p.settings FROM projects p WHERE p.id = e.project_id) AS settings,
       (SELECT d.physical_name FROM branch_databases d WHERE d.branch_id = e.branch_id AND d.name = $3) AS database,
       pr.physical_name AS role, pr.password_sealed, pr.no_login, br.name IS NOT NULL AS role_on_branch
     FROM endpoints e JOIN branches b ON b.id = e.branch_id
     LEFT JOIN branch_roles br ON br.branch_id = e.branch_id AND br.name = $2
     LEFT JOIN project_roles pr ON pr.project_id = br.project_id AND pr.name = br.name
     WHERE e.id = $1`,
    [endpointId, login.role, login.database],
  );
  const row = rows[0];
  if (!row) return null;
  const base = {
    endpointId: row.id as string,
    projectId: row.project_id as string,
    branchId: row.branch_id as string,
    type: row.type as EndpointType,
    readOnly: row.type === "read_only",
    state: row.current_state as EndpointState,
    disabled: row.disabled as boolean,
    ipAllowlist: allowlistOf(row.settings),
    branchProtected: row.branch_protected as boolean,
    rolePassword:
      row.role_on_branch && !row.no_login && row.password_sealed ? box.open(row.password_sealed) : null,
  };
  const refuse = (reason: EndpointRefusalReason, message: string): EndpointConnection => ({
    ...base,
    refusal: { reason, message },
    upstream: null,
  });
  if (row.disabled) return refuse("disabled", `endpoint ${endpointId} is disabled`);
  if (row.current_state === "idle") {
    return refuse(
      "suspended",
      `endpoint ${endpointId} is suspended: start it with POST /api/v2/projects/${row.project_id}/endpoints/${endpointId}/start`,
    );
  }
  if (row.current_state === "init")
    return refuse("starting", `endpoint ${endpointId} is starting: retry in a moment`);
  if (row.branch_state !== "ready")
    return refuse(
      "branch_not_ready",
      `branch ${row.branch_id} is not ready (${row.branch_state}): retry in a moment`,
    );
  if (!row.role_on_branch)
    return refuse("unknown_role", `password authentication failed for user "${login.role}"`);
  if (row.no_login || !row.password_sealed)
    return refuse("no_login", `role "${login.role}" is not permitted to log in`);
  if (!row.database) return refuse("unknown_database", `database "${login.database}" does not exist`);
  const cluster = new URL(clusterUrl);
  return {
    ...base,
    refusal: null,
    upstream: {
      host: cluster.hostname,
      port: Number(cluster.port || 5432),
      database: row.database,
      user: row.role,
      password: base.rolePassword ?? "",
    },
  };
}

/** Constant-time comparison of the password a client presented with the role's. */
export function passwordMatches(connection: EndpointConnection, presented: string): boolean {
  if (connection.rolePassword === null) return false;
  // Digests have one length, so the comparison says nothing about the password's length either.
  const digest = (text: string) => createHash("sha256").update(text, "utf8").digest();
  return timingSafeEqual(digest(connection.rolePassword), digest(presented));
}

/**
 * The endpoint a TLS server name (or host) designates: `ep-x.<proxy host>` and `ep-x-pooler.<proxy host>` both
 * mean `ep-x`. Null for other names.
 */
export function endpointIdFromHost(serverName: string, proxyHost: string): string | null {
  const suffix = `.${proxyHost.toLowerCase()}`;
  const name = serverName.toLowerCase();
  if (!name.endsWith(suffix)) return null;
  const label = name.slice(0, -suffix.length).replace(/-pooler$/, "");
  return /^ep-[a-z0-9-]{1,57}$/.test(label) ? label : null;
}
