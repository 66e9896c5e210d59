import type pg from "pg";
import type { ProjectCluster } from "./cluster.js";
import { newPhysicalRoleName } from "./ids.js";
import { quoteIdent } from "./sql.js";

/** The metadata's condition for a role that still has the name `<project role prefix>_<name>`. */
const LEGACY = "pr.physical_name = p.role_prefix || '_' || pr.name";

/**
 * Gives every project role still named `<project role prefix>_<name>` (a name that shows, in `pg_roles`, what a
 * project called its role) a random name (ids.ts), in the metadata and on the cluster. Returns how many roles
 * were renamed on the cluster.
 *
 * The metadata changes first and is committed: the old name can always be computed from the metadata again,
 * a random new one could not, so a crash between the two steps leaves a role that the next run renames. A
 * role's SCRAM verifier does not depend on its name, so its password keeps working; what it owns and what it
 * was granted follow it (PostgreSQL refers to roles by oid). Text that stored the old name (a column filled
 * with `current_user`, say) keeps it.
 */
export async function renameLegacyRoles(db: pg.Pool, cluster: ProjectCluster): Promise<number> {
  // A step still to run may name a role by its real name (a restore's owners, a detach): such a project's
  // roles keep their names until a start that finds its operations done.
  const { rows: legacy } = await db.query<{ project_id: string; name: string; physical_name: string }>(
    `SELECT pr.project_id, pr.name, pr.physical_name FROM project_roles pr JOIN projects p ON p.id = pr.project_id
     WHERE ${LEGACY} AND NOT EXISTS (SELECT 1 FROM operations o
       WHERE o.project_id = pr.project_id AND o.status IN ('scheduling', 'running'))`,
  );
  for (const role of legacy) {
    await db.query(
      "UPDATE project_roles SET physical_name = $4 WHERE project_id = $1 AND name = $2 AND physical_name = $3",
      [role.project_id, role.name, role.physical_name, newPhysicalRoleName()],
    );
  }
  const { rows: renamed } = await db.query<{ physical_name: string; legacy_name: string }>(
    `SELECT pr.physical_name, p.role_prefix || '_' || pr.name AS legacy_name
     FROM project_roles pr JOIN projects p ON p.id = pr.project_id WHERE NOT (${LEGACY})`,
  );
  const names = renamed.flatMap((role) => [role.physical_name, role.legacy_name]);
  const { rows: existing } = await cluster.admin.query<{ rolname: string }>(
    "SELECT rolname FROM pg_roles WHERE rolname = ANY($1::text[])",
    [names],
  );
  const onCluster = new Set(existing.map((row) => row.rolname));
  let count = 0;
  for (const role of renamed) {
    if (onCluster.has(role.physical_name) || !onCluster.has(role.legacy_name)) continue;
    await cluster.admin.query(
      `ALTER ROLE ${quoteIdent(role.legacy_name)} RENAME TO ${quoteIdent(role.physical_name)}`,
    );
    count++;
  }
  return count;
}
