import type { SecretBox } from "../providers/secret-box.js";
import { newRolePassword } from "./ids.js";
import type { PlannedOperation } from "./operations.js";
import type { Queryable } from "./sql.js";

/**
 * Gives a project role a new password in the metadata, in the caller's transaction: its generation moves on, so
 * the disclosures of the old one stop counting, and the proxy refuses the old one from the commit on. Returns it
 * with the operation that sets it on the cluster and ends the role's sessions (operation-steps.ts).
 */
export async function replacePassword(
  db: Queryable,
  box: SecretBox,
  projectId: string,
  roleName: string,
): Promise<{ password: string; planned: PlannedOperation }> {
  const password = newRolePassword();
  await db.query(
    `UPDATE project_roles SET password_sealed = $3, password_generation = password_generation + 1,
       updated_at = clock_timestamp() WHERE project_id = $1 AND name = $2`,
    [projectId, roleName, box.seal(password)],
  );
  return {
    password,
    planned: { action: "apply_config", step: { kind: "set_password", projectId, name: roleName } },
  };
}
