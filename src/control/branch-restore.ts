import type { BranchRestoreInput } from "./branch-inputs.js";
import { actorName, dropUnusedRoles, insertBranch, mirrorContents, NO_HISTORY } from "./branch-rows.js";
import { changeProject } from "./change.js";
import { badRequest, conflict } from "./control-error.js";
import { newBranchId } from "./ids.js";
import { databasesOf, endpointsOfBranch, getBranch } from "./lookups.js";
import { checkBranchName } from "./names.js";
import type { PlannedOperation } from "./operations.js";
import type { Plane } from "./plane.js";
import type { Principal } from "./principal.js";
import { retireUsage } from "./retire-usage.js";

/**
 * Restores a branch to the current state of `source_branch_id` (typically its parent): its databases are
 * replaced by fresh copies of the source's, and its roles become the source's. With `preserve_under_name` the
 * previous state is kept as a new branch of that name (required when the branch has children, which move to
 * it). The branch keeps its id and endpoints, whose sessions are restarted.
 */
export async function restoreBranch(
  plane: Plane,
  principal: Principal,
  projectId: string,
  branchId: string,
  input: BranchRestoreInput,
) {
  if (input.source_lsn !== undefined || input.source_timestamp !== undefined) throw badRequest(NO_HISTORY);
  if (input.source_branch_id === branchId)
    throw badRequest(`${NO_HISTORY}; restore from another branch, such as the parent`);
  const { operations } = await changeProject(plane, principal, projectId, async (client, { project }) => {
    const target = await getBranch(client, projectId, branchId, true);
    const source = await getBranch(client, projectId, input.source_branch_id);
    if (source.currentState !== "ready")
      throw conflict(`source branch ${source.id} is not ready (${source.currentState})`);
    const { rowCount: children } = await client.query("SELECT 1 FROM branches WHERE parent_id = $1 LIMIT 1", [
      branchId,
    ]);
    if (children && !input.preserve_under_name) {
      throw badRequest(
        `branch ${branchId} has child branches: give preserve_under_name to keep its current state as a new branch`,
      );
    }
    const old = await databasesOf(client, branchId);
    let replaced = old.map((d) => d.physicalName);
    if (input.preserve_under_name) {
      const preservedId = newBranchId();
      await insertBranch(client, {
        id: preservedId,
        projectId,
        parentId: target.parentId,
        name: checkBranchName(input.preserve_under_name),
        initSource: target.initSource,
        state: "ready",
        pendingState: null,
        createdBy: await actorName(client, principal),
      });
      await client.query("UPDATE branch_databases SET branch_id = $2 WHERE branch_id = $1", [
        branchId,
        preservedId,
      ]);
      await client.query(
        "INSERT INTO branch_roles (branch_id, project_id, name, protected) SELECT $2, project_id, name, protected FROM branch_roles WHERE branch_id = $1",
        [branchId, preservedId],
      );
      await client.query("UPDATE branches SET parent_id = $2 WHERE parent_id = $1 AND id <> $2", [
        branchId,
        preservedId,
      ]);
      replaced = [];
    } else {
      await retireUsage(client, plane.cluster, projectId, replaced);
      await client.query("DELETE FROM branch_databases WHERE branch_id = $1", [branchId]);
    }
    await client.query("DELETE FROM branch_roles WHERE branch_id = $1", [branchId]);
    const copies = await mirrorContents(client, project, source.id, branchId);
    await dropUnusedRoles(client, projectId);
    await client.query(
      `UPDATE branches SET parent_id = $2, current_state = 'resetting', pending_state = 'ready', state_changed_at = clock_timestamp(),
         updated_at = clock_timestamp() WHERE id = $1`,
      [branchId, source.id],
    );
    const endpoints = await endpointsOfBranch(client, branchId);
    const planned: PlannedOperation[] = [
      { action: "create_timeline", branchId, step: { kind: "restore_branch", branchId, copies, replaced } },
    ];
    for (const endpoint of endpoints.filter((e) => e.currentState === "active")) {
      planned.push({
        action: "suspend_compute",
        branchId,
        endpointId: endpoint.id,
        step: { kind: "suspend_endpoint", endpointId: endpoint.id },
      });
      planned.push({
        action: "start_compute",
        branchId,
        endpointId: endpoint.id,
        step: { kind: "start_endpoint", endpointId: endpoint.id },
      });
    }
    return { result: undefined, planned };
  });
  return { branch: await getBranch(plane.db, projectId, branchId), operations };
}
