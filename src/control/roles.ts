import { projectFor } from "./access.js";
import { branchObjectKind, changeOnBranch } from "./branch-objects.js";
import { conflict, preconditionFailed } from "./control-error.js";
import { queueDrops } from "./drop-queue.js";
import { newPhysicalRoleName, newRolePassword } from "./ids.js";
import { databasesOf, getBranch, getRole, rolesOf } from "./lookups.js";
import { checkRoleName } from "./names.js";
import { disclosePassword, recordDisclosure } from "./password-disclosures.js";
import type { Plane } from "./plane.js";
import type { Principal } from "./principal.js";
import { insertProjectRole } from "./project-role-rows.js";
import { replacePassword } from "./role-password-rotation.js";

const roles = branchObjectKind("role", rolesOf, getRole);

/** A branch's roles, and one of them by name, as the caller sees them. */
export const { list: listRoles, read: readRole } = roles;

/**
 * Creates a role on the branch: a real PostgreSQL role, with a random name on the cluster (ids.ts),
 * that may connect to the branch's databases. A role name is one role per project: when another branch of
 * the project already has it, this branch gets the same role (and password). Returns its password.
 */
export async function createRole(
  plane: Plane,
  principal: Principal,
  projectId: string,
  branchId: string,
  input: { name: string; no_login?: boolean },
) {
  let password: string | undefined;
  const change = await changeOnBranch(plane, principal, projectId, branchId, async (client, { project }) => {
    const name = checkRoleName(input.name, project.rolePrefix);
    const { rowCount: onBranch } = await client.query(
      "SELECT 1 FROM branch_roles WHERE branch_id = $1 AND name = $2",
      [branchId, name],
    );
    if (onBranch) throw conflict(`role ${name} already exists on branch ${branchId}`);
    const { rowCount: existing } = await client.query(
      "SELECT 1 FROM project_roles WHERE project_id = $1 AND name = $2",
      [projectId, name],
    );
    if (existing) {
      const sealed = await recordDisclosure(client, principal, projectId, name, "revealed");
      password = sealed === undefined ? undefined : plane.box.open(sealed);
    } else {
      password = input.no_login ? undefined : newRolePassword();
      await insertProjectRole(client, plane.box, principal, {
        projectId,
        name,
        physicalName: newPhysicalRoleName(),
        password,
      });
    }
    await client.query("INSERT INTO branch_roles (branch_id, project_id, name) VALUES ($1, $2, $3)", [
      branchId,
      projectId,
      name,
    ]);
    return {
      result: undefined,
      planned: [{ action: "apply_config", branchId, step: { kind: "create_role", branchId, name } }],
    };
  });
  return { role: await getRole(plane.db, branchId, input.name), password, operations: change.operations };
}

/**
 * Removes a role from the branch: what it owns in the branch's databases goes to each database's owner and it
 * may no longer connect to them. The real role is dropped once no branch has it. A role that owns one of the
 * branch's databases, or a protected role, cannot be removed (409).
 */
export const deleteRole = roles.removal(async (client, role, { projectId, branchId }) => {
  const { name } = role;
  if (role.protected) throw conflict(`role ${name} is protected`);
  const databases = await databasesOf(client, branchId);
  const owned = databases.find((database) => database.ownerName === name);
  if (owned)
    throw conflict(
      `role ${name} owns database ${owned.name}: delete the database or give it another owner first`,
    );
  await client.query("DELETE FROM branch_roles WHERE branch_id = $1 AND name = $2", [branchId, name]);
  const { rowCount: elsewhere } = await client.query(
    "SELECT 1 FROM branch_roles WHERE project_id = $1 AND name = $2 LIMIT 1",
    [projectId, name],
  );
  if (!elsewhere) {
    await client.query("DELETE FROM project_roles WHERE project_id = $1 AND name = $2", [projectId, name]);
    await queueDrops(client, [{ kind: "role", physicalName: role.physicalName }]);
  }
  return [
    {
      action: "apply_config",
      branchId,
      step: {
        kind: "detach_role",
        physicalName: role.physicalName,
        databases: databases.map((d) => d.physicalName),
      },
    },
  ];
});

/**
 * The role's password (412 when the project does not store passwords, or the role cannot log in). Any caller
 * who may manage the project may read it; the disclosure is recorded, so that the password is rotated once that
 * caller's access is taken away (revocation.ts).
 */
export async function revealPassword(
  plane: Plane,
  principal: Principal,
  projectId: string,
  branchId: string,
  name: string,
) {
  const { project } = await projectFor(plane.db, principal, projectId);
  await getBranch(plane.db, projectId, branchId);
  const role = await getRole(plane.db, branchId, name);
  if (!project.storePasswords)
    throw preconditionFailed(`project ${projectId} does not store passwords: reset the password instead`);
  return disclosePassword(plane, principal, projectId, role.name);
}

/**
 * Gives the role a new password, on the cluster too, and ends the role's sessions. A role is one PostgreSQL role
 * per project, so the new password holds on every branch that has it. Like a reveal, the new password is
 * recorded as shown to the caller.
 */
export async function resetPassword(
  plane: Plane,
  principal: Principal,
  projectId: string,
  branchId: string,
  name: string,
) {
  const { result: password, operations } = await changeOnBranch(
    plane,
    principal,
    projectId,
    branchId,
    async (client) => {
      const role = await getRole(client, branchId, name);
      if (role.noLogin) throw preconditionFailed(`role ${name} cannot log in: it has no password`);
      const { password, planned } = await replacePassword(client, plane.box, projectId, role.name);
      await recordDisclosure(client, principal, projectId, role.name, "reset");
      await client.query(
        "UPDATE branch_roles SET updated_at = clock_timestamp() WHERE branch_id = $1 AND name = $2",
        [branchId, name],
      );
      return { result: password, planned: [{ ...planned, branchId }] };
    },
  );
  return { role: await getRole(plane.db, branchId, name), password, operations };
}
