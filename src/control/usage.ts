import type { ProjectCluster } from "./cluster.js";
import type { Queryable } from "./sql.js";

/** What the cluster measures for a set of databases. */
export interface Usage {
  /** Bytes on disk (pg_database_size). */
  sizeBytes: number;
  /** Milliseconds spent executing statements (pg_stat_database.active_time). */
  activeMs: number;
  /** Milliseconds sessions were connected (pg_stat_database.session_time). */
  sessionMs: number;
}

const ZERO: Usage = { sizeBytes: 0, activeMs: 0, sessionMs: 0 };

/** Per physical database; databases the cluster does not have count as zero. */
export async function databaseUsage(
  cluster: ProjectCluster,
  databases: readonly string[],
): Promise<Map<string, Usage>> {
  const usage = new Map<string, Usage>();
  if (!databases.length) return usage;
  const { rows } = await cluster.admin.query(
    `SELECT d.datname, pg_database_size(d.oid)::float8 AS size, coalesce(s.active_time, 0)::float8 AS active,
       coalesce(s.session_time, 0)::float8 AS session
     FROM pg_database d LEFT JOIN pg_stat_database s ON s.datid = d.oid
     WHERE d.datname = ANY($1::text[])`,
    [databases],
  );
  for (const row of rows)
    usage.set(row.datname, { sizeBytes: row.size, activeMs: row.active, sessionMs: row.session });
  return usage;
}

export function sumUsage(usage: Map<string, Usage>, databases: readonly string[]): Usage {
  return databases.reduce<Usage>((total, name) => {
    const u = usage.get(name) ?? ZERO;
    return {
      sizeBytes: total.sizeBytes + u.sizeBytes,
      activeMs: total.activeMs + u.activeMs,
      sessionMs: total.sessionMs + u.sessionMs,
    };
  }, ZERO);
}

/** The physical databases of each project (or branch), keyed by project (or branch) id. */
export async function physicalDatabasesBy(
  db: Queryable,
  key: "project" | "branch",
  ids: readonly string[],
): Promise<Map<string, string[]>> {
  const byKey = new Map<string, string[]>();
  if (!ids.length) return byKey;
  const column = key === "project" ? "b.project_id" : "b.id";
  const { rows } = await db.query(
    `SELECT ${column} AS key, d.physical_name FROM branch_databases d JOIN branches b ON b.id = d.branch_id
     WHERE ${column} = ANY($1::text[])`,
    [ids],
  );
  for (const row of rows) byKey.set(row.key, [...(byKey.get(row.key) ?? []), row.physical_name]);
  return byKey;
}
