import type { ProjectCluster } from "./cluster.js";
import { quoteIdent } from "./sql.js";

export async function physicalDatabaseExists(cluster: ProjectCluster, name: string): Promise<boolean> {
  const { rowCount } = await cluster.admin.query("SELECT 1 FROM pg_database WHERE datname = $1", [name]);
  return Boolean(rowCount);
}

/**
 * Only the branch's roles may connect to a branch database (PUBLIC may not), so that the roles of one project
 * never reach another project's data even when they talk to the cluster directly. Databases are created
 * closed to everyone (`ALLOW_CONNECTIONS false`, see below) and opened here once PUBLIC has lost its rights:
 * a copy of a branch's data is never reachable by another tenant, not even for the instant after it exists.
 */
export async function restrictConnections(
  cluster: ProjectCluster,
  database: string,
  roles: readonly string[],
): Promise<void> {
  const db = quoteIdent(database);
  await cluster.admin.query(`REVOKE ALL ON DATABASE ${db} FROM PUBLIC`);
  if (roles.length)
    await cluster.admin.query(
      `GRANT CONNECT, TEMPORARY ON DATABASE ${db} TO ${roles.map(quoteIdent).join(", ")}`,
    );
  await cluster.admin.query(`ALTER DATABASE ${db} ALLOW_CONNECTIONS true`);
}

export async function grantConnect(
  cluster: ProjectCluster,
  databases: readonly string[],
  role: string,
): Promise<void> {
  for (const database of databases) {
    if (await physicalDatabaseExists(cluster, database)) {
      await cluster.admin.query(
        `GRANT CONNECT, TEMPORARY ON DATABASE ${quoteIdent(database)} TO ${quoteIdent(role)}`,
      );
    }
  }
}

/**
 * Creates an empty database owned by `owner` unless it exists (a re-run after a crash converges), closed to
 * connections until {@link restrictConnections} opens it. It gets no comment: `pg_database` and its comments
 * are readable by every role on the cluster, so what a database is for is kept in pgtoll's metadata only.
 */
export async function ensurePhysicalDatabase(
  cluster: ProjectCluster,
  name: string,
  owner: string,
): Promise<void> {
  if (!(await physicalDatabaseExists(cluster, name))) {
    await cluster.admin.query(
      `CREATE DATABASE ${quoteIdent(name)} OWNER ${quoteIdent(owner)} TEMPLATE template1 ALLOW_CONNECTIONS false`,
    );
  }
}

/**
 * A file-level copy of `source` (schema and data), owned by `owner`, closed to connections until
 * {@link restrictConnections} opens it (a new database's ACL lets PUBLIC connect; the copy's data must not be
 * reachable by then). PostgreSQL requires that nobody is connected to `source` while it runs: callers fence it
 * first (see fence.ts).
 */
export async function copyPhysicalDatabase(
  cluster: ProjectCluster,
  source: string,
  target: string,
  owner: string,
): Promise<void> {
  await cluster.admin.query(`DROP DATABASE IF EXISTS ${quoteIdent(target)} WITH (FORCE)`);
  await cluster.admin.query(
    `CREATE DATABASE ${quoteIdent(target)} TEMPLATE ${quoteIdent(source)} OWNER ${quoteIdent(owner)} ALLOW_CONNECTIONS false`,
  );
}

export async function dropPhysicalDatabase(cluster: ProjectCluster, name: string): Promise<void> {
  await cluster.admin.query(`DROP DATABASE IF EXISTS ${quoteIdent(name)} WITH (FORCE)`);
}

/** Sets the owner of a database (the owner's role must exist). */
export async function setPhysicalOwner(cluster: ProjectCluster, name: string, owner: string): Promise<void> {
  await cluster.admin.query(`ALTER DATABASE ${quoteIdent(name)} OWNER TO ${quoteIdent(owner)}`);
}
