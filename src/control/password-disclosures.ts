import type pg from "pg";
import type { SecretBox } from "../providers/secret-box.js";
import { projectFor } from "./access.js";
import { preconditionFailed } from "./control-error.js";
import { userOf } from "./key-principals.js";
import type { Principal } from "./principal.js";
import { holdAgainstRevocation } from "./revocation-lock.js";
import { inTransaction, type Queryable } from "./sql.js";

/** How a role's password reached a caller: it made the role (or the project), asked for it, or reset it. */
export type DisclosureKind = "created" | "revealed" | "reset";

// One statement: the password read and the generation recorded are of the same row version, whatever resets
// the role concurrently.
const DISCLOSE = `WITH role AS (
    SELECT project_id, name, password_generation, password_sealed FROM project_roles
     WHERE project_id = $1 AND name = $2 AND password_sealed IS NOT NULL),
  shown AS (
    INSERT INTO role_password_disclosures (project_id, role_name, password_generation, api_key_id, user_id, how)
    SELECT project_id, name, password_generation, $3, $4, $5 FROM role)
  SELECT password_sealed FROM role`;

/**
 * Records that the role's current password is shown to `principal`, and returns it sealed (undefined for a role
 * without one). Every answer that carries a password goes through here, so that taking that principal's access
 * away rotates it (revocation.ts).
 */
export async function recordDisclosure(
  db: Queryable,
  principal: Principal,
  projectId: string,
  roleName: string,
  how: DisclosureKind,
): Promise<string | undefined> {
  const { rows } = await db.query(DISCLOSE, [projectId, roleName, principal.keyId, userOf(principal), how]);
  return rows[0]?.password_sealed;
}

/**
 * The role's current password for `principal`, read and recorded in one transaction that checks the caller's
 * access again while holding off revocations (revocation-lock.ts); 412 for a role without one.
 */
export async function disclosePassword(
  plane: { db: pg.Pool; box: SecretBox },
  principal: Principal,
  projectId: string,
  roleName: string,
): Promise<string> {
  const sealed = await inTransaction(plane.db, async (client) => {
    await holdAgainstRevocation(client, principal);
    await projectFor(client, principal, projectId);
    return recordDisclosure(client, principal, projectId, roleName, "revealed");
  });
  if (sealed === undefined) throw preconditionFailed(`role ${roleName} cannot log in: it has no password`);
  return plane.box.open(sealed);
}
