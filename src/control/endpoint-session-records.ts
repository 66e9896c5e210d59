import type { Queryable } from "./sql.js";

/**
 * The upstream backend of an open endpoint session, as `endpoint_sessions` records it. A backend is known by its
 * pid and start time (microseconds since the epoch, as the cluster reports it): a pid alone is reused by later
 * backends, and `application_name` is the client's to change, so neither identifies pgtoll's sessions.
 */
export interface RecordedBackend {
  pid: number;
  startUs: string;
}

export interface EndpointSessionFacts {
  endpointId: string;
  projectId: string;
  branchId: string;
  /** The real role and database the upstream session logged in to. */
  physicalRole: string;
  physicalDatabase: string;
  /** The client's address as the proxy saw it: an allowlist change ends the sessions it no longer admits. */
  clientAddress: string;
  /** The upstream backend's pid (its BackendKeyData). */
  backendPid: number;
}

/** The cluster's own start time of a backend, as an exact integer (a JS Date would drop the microseconds). */
export const BACKEND_START_US = "(extract(epoch FROM backend_start) * 1000000)::bigint";

/**
 * Records an endpoint session's upstream backend, shared with every pgtoll process through the metadata
 * database. The backend's start time is read from the cluster (`cluster` is a superuser pool on it), checking
 * on the way that the pid is still that role's backend on that database. Returns the record's id, or null when
 * the backend is gone already (it was ended while the session started). Also records the endpoint's activity
 * (`last_active`).
 */
export async function recordEndpointSession(
  db: Queryable,
  cluster: Queryable,
  session: EndpointSessionFacts,
): Promise<number | null> {
  const { rows: backends } = await cluster.query(
    `SELECT ${BACKEND_START_US}::text AS start_us FROM pg_stat_activity
      WHERE pid = $1 AND usename = $2 AND datname = $3`,
    [session.backendPid, session.physicalRole, session.physicalDatabase],
  );
  if (!backends[0]) return null;
  // One statement, one commit: the record, and the endpoint's last_active (a client connected through it).
  const { rows } = await db.query(
    `WITH recorded AS (
       INSERT INTO endpoint_sessions (backend_pid, backend_start_us, endpoint_id, project_id, branch_id, physical_role,
         physical_database, client_addr) VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING id),
     active AS (UPDATE endpoints SET last_active = clock_timestamp() WHERE id = $3)
     SELECT id FROM recorded`,
    [
      session.backendPid,
      backends[0].start_us,
      session.endpointId,
      session.projectId,
      session.branchId,
      session.physicalRole,
      session.physicalDatabase,
      session.clientAddress,
    ],
  );
  return Number(rows[0].id);
}

/** Forgets records once their sessions have ended. */
export async function forgetEndpointSessions(db: Queryable, ids: readonly number[]): Promise<void> {
  if (ids.length) await db.query("DELETE FROM endpoint_sessions WHERE id = ANY($1::bigint[])", [ids]);
}

/**
 * Forgets the records whose backends no longer run: those of a pgtoll process that died without forgetting its
 * sessions. The records are read before the cluster's backends, and a record is written only once its backend
 * runs, so a record whose backend is missing from the later list has ended. Returns how many were forgotten.
 */
export async function forgetEndedSessions(db: Queryable, cluster: Queryable): Promise<number> {
  const { rows: records } = await db.query(
    "SELECT id, backend_pid, backend_start_us::text AS start_us FROM endpoint_sessions",
  );
  if (!records.length) return 0;
  const { rows: running } = await cluster.query(
    `SELECT pid, ${BACKEND_START_US}::text AS start_us FROM pg_stat_activity WHERE backend_type = 'client backend'`,
  );
  const alive = new Set(running.map((row) => `${row.pid}/${row.start_us}`));
  const ended = records
    .filter((row) => !alive.has(`${row.backend_pid}/${row.start_us}`))
    .map((row) => Number(row.id));
  await forgetEndpointSessions(db, ended);
  return ended.length;
}
