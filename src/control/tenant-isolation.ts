import type pg from "pg";
import type { Logger } from "pino";
import type { ProjectCluster } from "./cluster.js";
import { renameLegacyRoles } from "./legacy-role-names.js";
import { quoteIdent } from "./sql.js";

/** Any fixed number: processes starting at once take turns. */
const ISOLATION_LOCK_KEY = 7_411_626_012;

/**
 * Brings what exists on the cluster to the layout that keeps tenants apart (docs/security.md, "Tenant
 * isolation"), at every start of the management plane. Idempotent; processes starting together take turns.
 *
 * - pgtoll's metadata database: PUBLIC may not connect. In the embedded setup it is on the cluster that
 *   hosts projects, whose roles know their passwords.
 * - `template1`, which every new project database copies: PUBLIC may not connect, so no tenant can leave
 *   objects (on PostgreSQL before 15, PUBLIC may create in its `public` schema) in other tenants' databases.
 * - Every project database: no comment (comments on databases are readable by every role), no right for PUBLIC.
 * - Project roles named after what their project called them get random names (legacy-role-names.ts).
 */
export async function isolateTenants(db: pg.Pool, cluster: ProjectCluster, logger: Logger): Promise<void> {
  const client = await db.connect();
  try {
    await client.query("SELECT pg_advisory_lock($1)", [ISOLATION_LOCK_KEY]);
    await closeToPublic(client, "current_database()", logger);
    await closeToPublic(cluster.admin, "'template1'", logger);
    const sealed = await sealProjectDatabases(client, cluster);
    const renamed = await renameLegacyRoles(db, cluster);
    if (sealed || renamed)
      logger.info({ databases: sealed, roles: renamed }, "project databases and roles made anonymous");
  } finally {
    await client.query("SELECT pg_advisory_unlock($1)", [ISOLATION_LOCK_KEY]).catch(() => {});
    client.release();
  }
}

/**
 * Takes CONNECT and TEMPORARY from PUBLIC on a database (`database`: an SQL expression of its name). Only its
 * owner or a superuser can: anyone else gets a warning from PostgreSQL, and pgtoll logs one of its own.
 */
async function closeToPublic(db: pg.Pool | pg.PoolClient, database: string, logger: Logger): Promise<void> {
  const { rows } = await db.query<{ name: string }>(`SELECT ${database} AS name`);
  const name = rows[0]!.name;
  await db.query(`REVOKE CONNECT, TEMPORARY ON DATABASE ${quoteIdent(name)} FROM PUBLIC`);
  const { rows: open } = await db.query<{ open: boolean }>(
    "SELECT has_database_privilege('public', $1, 'CONNECT') AS open",
    [name],
  );
  if (open[0]?.open)
    logger.warn(
      { database: name },
      "every role of the cluster may still connect to this database: its owner or a superuser should REVOKE CONNECT ON DATABASE ... FROM PUBLIC",
    );
}

/** Removes comments and PUBLIC's rights from the project databases that have any. Returns how many. */
async function sealProjectDatabases(db: pg.PoolClient, cluster: ProjectCluster): Promise<number> {
  const { rows } = await db.query<{ name: string }>(
    `SELECT physical_name AS name FROM branch_databases
     UNION SELECT physical_name FROM physical_drops WHERE kind = 'database'`,
  );
  const { rows: open } = await cluster.admin.query<{ datname: string }>(
    `SELECT datname FROM pg_database WHERE datname = ANY($1::text[])
       AND (shobj_description(oid, 'pg_database') IS NOT NULL
         OR has_database_privilege('public', oid, 'CONNECT') OR has_database_privilege('public', oid, 'TEMPORARY')
         OR has_database_privilege('public', oid, 'CREATE'))`,
    [rows.map((row) => row.name)],
  );
  for (const { datname } of open) {
    await cluster.admin.query(`COMMENT ON DATABASE ${quoteIdent(datname)} IS NULL`);
    await cluster.admin.query(`REVOKE ALL ON DATABASE ${quoteIdent(datname)} FROM PUBLIC`);
  }
  return open.length;
}
