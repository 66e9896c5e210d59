import { SqlState } from "../db/sql-state.js";
import { checkDoesNotExpire, checkExpiringBranch, parseExpiresAt } from "./branch-expiry-rules.js";
import type { BranchUpdateInput } from "./branch-inputs.js";
import { changeProject } from "./change.js";
import { conflict } from "./control-error.js";
import { allowlistOf, endDisallowedSessions } from "./ip-allowlist.js";
import { getBranch } from "./lookups.js";
import { checkBranchName } from "./names.js";
import type { Plane } from "./plane.js";
import type { Principal } from "./principal.js";
import { sqlState } from "./sql.js";

/**
 * Renames a branch, or changes its protection or expiry (metadata only; protecting it under an allowlist also
 * ends the sessions the allowlist does not admit). Setting an expiry, or
 * protecting a branch that has one, is refused (409) where Neon refuses it (branch-expiry-rules.ts).
 */
export async function updateBranch(
  plane: Plane,
  principal: Principal,
  projectId: string,
  branchId: string,
  input: BranchUpdateInput,
) {
  const expiresAt = parseExpiresAt(input.expires_at);
  const { operations } = await changeProject(plane, principal, projectId, async (client, { project }) => {
    const branch = await getBranch(client, projectId, branchId, true);
    const name = input.name === undefined ? branch.name : checkBranchName(input.name);
    const next = {
      ...branch,
      protected: input.protected ?? branch.protected,
      expiresAt: expiresAt === undefined ? branch.expiresAt : expiresAt,
    };
    // Only a change that sets an expiry or a protection is checked: a rename goes through whatever the state.
    if (expiresAt || input.protected) await checkExpiringBranch(client, next);
    try {
      await client.query(
        "UPDATE branches SET name = $2, protected = $3, expires_at = $4, updated_at = clock_timestamp() WHERE id = $1",
        [branchId, name, next.protected, next.expiresAt],
      );
    } catch (error) {
      if (sqlState(error) === SqlState.uniqueViolation)
        throw conflict(`a branch named "${name}" already exists in this project`);
      throw error;
    }
    // A newly protected branch may fall under an allowlist for protected branches only.
    const fenced = next.protected && !branch.protected && allowlistOf(project.settings) !== null;
    return { result: undefined, planned: fenced ? [endDisallowedSessions(projectId)] : [] };
  });
  return { branch: await getBranch(plane.db, projectId, branchId), operations };
}

/** Makes the branch the project's default branch (409 for a branch that expires: the default never does). */
export async function setDefaultBranch(
  plane: Plane,
  principal: Principal,
  projectId: string,
  branchId: string,
) {
  const { operations } = await changeProject(plane, principal, projectId, async (client) => {
    const branch = await getBranch(client, projectId, branchId, true);
    checkDoesNotExpire(branch, "the default branch");
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
