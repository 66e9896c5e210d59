import type { ProjectCluster } from "./cluster.js";
import { endRoleSessions } from "./endpoint-sessions.js";
import { scramVerifier } from "./scram-verifier.js";
import { quoteIdent, quoteLiteral } from "./sql.js";

/**
 * Creates the project role on the cluster, or sets its password when it exists already (so that a re-run
 * after a crash converges). Roles get no cluster-wide powers (no SUPERUSER, CREATEDB or CREATEROLE): those
 * would reach past the project's namespace. The password is sent as a SCRAM verifier, never in clear.
 */
export async function ensurePhysicalRole(
  cluster: ProjectCluster,
  physicalName: string,
  password: string | null,
): Promise<void> {
  const auth = password === null ? "NOLOGIN" : `LOGIN PASSWORD ${quoteLiteral(scramVerifier(password))}`;
  const { rowCount } = await cluster.admin.query("SELECT 1 FROM pg_roles WHERE rolname = $1", [physicalName]);
  const verb = rowCount ? "ALTER" : "CREATE";
  await cluster.admin.query(
    `${verb} ROLE ${quoteIdent(physicalName)} ${auth} NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS`,
  );
}

export async function setPhysicalPassword(
  cluster: ProjectCluster,
  physicalName: string,
  password: string,
): Promise<void> {
  await cluster.admin.query(
    `ALTER ROLE ${quoteIdent(physicalName)} PASSWORD ${quoteLiteral(scramVerifier(password))}`,
  );
}

/**
 * Detaches a role from some databases: it may no longer connect, its sessions there end, what it owns there goes
 * to the database's owner and its privileges there are dropped. Databases that no longer exist are skipped.
 */
export async function detachPhysicalRole(
  cluster: ProjectCluster,
  physicalName: string,
  databases: readonly string[],
): Promise<void> {
  const role = quoteIdent(physicalName);
  const { rowCount } = await cluster.admin.query("SELECT 1 FROM pg_roles WHERE rolname = $1", [physicalName]);
  if (!rowCount) return;
  const owners = new Map<string, string>();
  for (const database of databases) {
    const { rows } = await cluster.admin.query(
      "SELECT pg_get_userbyid(datdba) AS owner FROM pg_database WHERE datname = $1",
      [database],
    );
    if (!rows[0]) continue;
    owners.set(database, rows[0].owner);
    await cluster.admin.query(`REVOKE ALL ON DATABASE ${quoteIdent(database)} FROM ${role}`);
  }
  // Once it may not connect again: its open sessions would otherwise keep working, and their locks would hold
  // up REASSIGN OWNED.
  await endRoleSessions(cluster, physicalName, [...owners.keys()]);
  for (const [database, owner] of owners) {
    if (owner === physicalName) continue;
    await cluster.withDatabase(database, async (client) => {
      await client.query(`REASSIGN OWNED BY ${role} TO ${quoteIdent(owner)}`);
      await client.query(`DROP OWNED BY ${role}`);
    });
  }
}

export async function dropPhysicalRole(cluster: ProjectCluster, physicalName: string): Promise<void> {
  await cluster.admin.query(`DROP ROLE IF EXISTS ${quoteIdent(physicalName)}`);
}
