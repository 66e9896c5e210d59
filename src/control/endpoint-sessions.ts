import type { ProjectCluster } from "./cluster.js";
import { BACKEND_START_US, forgetEndpointSessions } from "./endpoint-session-records.js";
import { addressAllowed, allowlistOf } from "./ip-allowlist.js";
import type { Queryable } from "./sql.js";

/** What ending sessions needs: the metadata database (the records) and the cluster (the backends). */
export interface SessionEnding {
  db: Queryable;
  cluster: ProjectCluster;
}

interface SessionRecordRow {
  id: string;
  backend_pid: number;
  start_us: string;
}

const RECORD_COLUMNS = "s.id, s.backend_pid, s.backend_start_us::text AS start_us";

/**
 * Ends the backends of recorded sessions, each matched by pid and start time so that a later backend that got
 * the same pid is never touched, and forgets the records. Waits up to 5 s for each backend to exit.
 */
async function endRecorded(ctx: SessionEnding, records: readonly SessionRecordRow[]): Promise<number> {
  if (!records.length) return 0;
  const { rows } = await ctx.cluster.admin.query(
    `SELECT pg_terminate_backend(a.pid, 5000) FROM pg_stat_activity a
       JOIN unnest($1::int[], $2::bigint[]) AS r(pid, start_us) ON a.pid = r.pid AND ${BACKEND_START_US} = r.start_us`,
    [records.map((row) => row.backend_pid), records.map((row) => row.start_us)],
  );
  await forgetEndpointSessions(
    ctx.db,
    records.map((row) => Number(row.id)),
  );
  return rows.length;
}

/** Ends every session opened through the endpoint (suspend, disable, delete, restore, a move to another branch). */
export async function endEndpointSessions(ctx: SessionEnding, endpointId: string): Promise<number> {
  const { rows } = await ctx.db.query<SessionRecordRow>(
    `SELECT ${RECORD_COLUMNS} FROM endpoint_sessions s WHERE s.endpoint_id = $1`,
    [endpointId],
  );
  return endRecorded(ctx, rows);
}

/**
 * Ends the sessions of the project's endpoints whose client address the project's allowlist, as it is now, no
 * longer admits (the same rule the proxy applies when a session starts).
 */
export async function endSessionsOutsideAllowlist(ctx: SessionEnding, projectId: string): Promise<number> {
  const { rows } = await ctx.db.query<SessionRecordRow & { client_addr: string; protected: boolean | null }>(
    `SELECT ${RECORD_COLUMNS}, s.client_addr, b.protected FROM endpoint_sessions s
       LEFT JOIN branches b ON b.id = s.branch_id WHERE s.project_id = $1`,
    [projectId],
  );
  const { rows: projects } = await ctx.db.query("SELECT settings FROM projects WHERE id = $1", [projectId]);
  const allowlist = allowlistOf(projects[0]?.settings ?? null);
  // A session whose branch is gone counts as one to a protected branch: the stricter reading.
  const refused = rows.filter((row) => !addressAllowed(allowlist, row.protected ?? true, row.client_addr));
  return endRecorded(ctx, refused);
}

/**
 * Ends every session logged in as the real role (on `databases` only, when given), through pgtoll or not: the
 * session user is fixed at login, and a role without superuser cannot change it. Run it after the role's
 * password changed or its CONNECT was revoked, so that a session cannot start again in between.
 */
export async function endRoleSessions(
  cluster: ProjectCluster,
  physicalRole: string,
  databases?: readonly string[],
): Promise<number> {
  const { rows } = await cluster.admin.query(
    `SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity
      WHERE usename = $1 AND ($2::text[] IS NULL OR datname = ANY($2::text[])) AND pid <> pg_backend_pid()`,
    [physicalRole, databases ?? null],
  );
  return rows.length;
}
