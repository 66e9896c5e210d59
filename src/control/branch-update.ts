import type { BranchUpdateInput } from "./branch-inputs.js";
import { expiry } from "./branch-rows.js";
import { changeProject } from "./change.js";
import { conflict } from "./control-error.js";
import type { ControlPlane } from "./control-plane.js";
import { getBranch } from "./lookups.js";
import { checkBranchName } from "./names.js";
import type { Principal } from "./principal.js";
import { sqlState } from "./sql.js";

/** Renames a branch, or changes its protection or expiry (metadata only: no operation). */
export async function updateBranch(
  plane: ControlPlane,
  principal: Principal,
  projectId: string,
  branchId: string,
  input: BranchUpdateInput,
) {
  const { operations } = await changeProject(plane, principal, projectId, async (client) => {
    const branch = await getBranch(client, projectId, branchId, true);
    const name = input.name === undefined ? branch.name : checkBranchName(input.name);
    try {
      await client.query(
        "UPDATE branches SET name = $2, protected = $3, expires_at = $4, updated_at = clock_timestamp() WHERE id = $1",
        [
          branchId,
          name,
          input.protected ?? branch.protected,
          input.expires_at === undefined ? branch.expiresAt : expiry(input.expires_at),
        ],
      );
    } catch (error) {
      if (sqlState(error) === "23505")
        throw conflict(`a branch named "${name}" already exists in this project`);
      throw error;
    }
    return { result: undefined, planned: [] };
  });
  return { branch: await getBranch(plane.db, projectId, branchId), operations };
}

/** Makes the branch the project's default branch. */
export async function setDefaultBranch(
  plane: ControlPlane,
  principal: Principal,
  projectId: string,
  branchId: string,
) {
  const { operations } = await changeProject(plane, principal, projectId, async (client) => {
    await getBranch(client, projectId, branchId, true);
    await client.query(
      "UPDATE branches SET is_default = false, updated_at = clock_timestamp() WHERE project_id = $1 AND is_default",
      [projectId],
    );
    await client.query(
      "UPDATE branches SET is_default = true, updated_at = clock_timestamp() WHERE id = $1",
      [branchId],
    );
    return { result: undefined, planned: [] };
  });
  return { branch: await getBranch(plane.db, projectId, branchId), operations };
}
