import type { SecretBox } from "../providers/secret-box.js";
import { userOf } from "./key-principals.js";
import { recordDisclosure } from "./password-disclosures.js";
import type { Principal } from "./principal.js";
import type { Queryable } from "./sql.js";

/**
 * Writes a new project role, with who created it (the key and its user), and records its password as shown to
 * that key: the answer that creates a role carries its password.
 */
export async function insertProjectRole(
  db: Queryable,
  box: SecretBox,
  principal: Principal,
  role: { projectId: string; name: string; physicalName: string; password: string | undefined },
): Promise<void> {
  await db.query(
    `INSERT INTO project_roles (project_id, name, physical_name, password_sealed, no_login, created_by_user_id,
       created_by_key_id) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
    [
      role.projectId,
      role.name,
      role.physicalName,
      role.password === undefined ? null : box.seal(role.password),
      role.password === undefined,
      userOf(principal),
      principal.keyId,
    ],
  );
  if (role.password !== undefined)
    await recordDisclosure(db, principal, role.projectId, role.name, "created");
}
