import type pg from "pg";
import { hasChildren } from "./branch-expiry-rules.js";
import { dropUnusedRoles } from "./branch-rows.js";
import { changeProject } from "./change.js";
import type { ProjectCluster } from "./cluster.js";
import { conflict } from "./control-error.js";
import { queueDrops } from "./drop-queue.js";
import { databasesOf, endpointsOfBranch, getBranch } from "./lookups.js";
import type { OperationRow, PlannedOperation } from "./operations.js";
import type { Plane } from "./plane.js";
import type { Principal } from "./principal.js";
import { retireUsage } from "./retire-usage.js";
import type { BranchRow } from "./rows.js";
import type { Queryable } from "./sql.js";

/**
 * Deletes a branch: its endpoints' sessions end, its databases are dropped for real, and roles only it had go
 * too. Refused (409) for the default branch, a protected branch and a branch with children.
 */
export async function deleteBranch(
  plane: Plane,
  principal: Principal,
  projectId: string,
  branchId: string,
): Promise<{ branch: BranchRow; operations: OperationRow[] }> {
  const { result, operations } = await changeProject(
    plane,
    principal,
    projectId,
    async (client: pg.PoolClient) => {
      const branch = await getBranch(client, projectId, branchId, true);
      const refusal = await deletionRefusal(client, branch);
      if (refusal) throw conflict(refusal);
      return { result: branch, planned: await removeBranch(client, plane.cluster, branch) };
    },
  );
  return { branch: result, operations };
}

/** Why the branch may not be deleted, or null when it may. */
export async function deletionRefusal(db: Queryable, branch: BranchRow): Promise<string | null> {
  if (branch.isDefault) return `branch ${branch.id} is the project's default branch and cannot be deleted`;
  if (branch.protected) return `branch ${branch.id} is protected: unprotect it before deleting it`;
  if (await hasChildren(db, branch.id)) return `branch ${branch.id} has child branches: delete them first`;
  return null;
}

/**
 * The metadata part of a branch deletion, inside the transaction of a change to its project (the branch row
 * locked, `deletionRefusal` passed): forgets the branch and its endpoints, queues its databases (and the roles
 * only it had) for dropping, and returns the operations that finish the job on the cluster.
 */
export async function removeBranch(
  client: Queryable,
  cluster: ProjectCluster,
  branch: BranchRow,
): Promise<PlannedOperation[]> {
  const { id: branchId, projectId } = branch;
  const databases = (await databasesOf(client, branchId)).map((d) => d.physicalName);
  await retireUsage(client, cluster, projectId, databases);
  await queueDrops(
    client,
    databases.map((physicalName) => ({ kind: "database" as const, physicalName })),
  );
  const endpoints = await endpointsOfBranch(client, branchId);
  await client.query("DELETE FROM endpoints WHERE branch_id = $1", [branchId]);
  await client.query("DELETE FROM branches WHERE id = $1", [branchId]);
  await dropUnusedRoles(client, projectId);
  const planned: PlannedOperation[] = endpoints.map((endpoint) => ({
    action: "suspend_compute",
    branchId,
    endpointId: endpoint.id,
    step: { kind: "suspend_endpoint", endpointId: endpoint.id },
  }));
  planned.push({ action: "delete_timeline", branchId, step: { kind: "drop_queued" } });
  return planned;
}
