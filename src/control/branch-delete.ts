import type pg from "pg";
import { dropUnusedRoles } from "./branch-rows.js";
import { changeProject } from "./change.js";
import { conflict } from "./control-error.js";
import type { ControlPlane } from "./control-plane.js";
import { queueDrops } from "./drop-queue.js";
import { databasesOf, endpointsOfBranch, getBranch } from "./lookups.js";
import type { OperationRow, PlannedOperation } from "./operations.js";
import type { Principal } from "./principal.js";
import { retireUsage } from "./retire-usage.js";
import type { BranchRow } from "./rows.js";

/**
 * Deletes a branch: its endpoints' sessions end, its databases are dropped for real, and roles only it had go
 * too. Refused (409) for the default branch, a protected branch and a branch with children.
 */
export async function deleteBranch(
  plane: ControlPlane,
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
      if (branch.isDefault)
        throw conflict(`branch ${branchId} is the project's default branch and cannot be deleted`);
      if (branch.protected)
        throw conflict(`branch ${branchId} is protected: unprotect it before deleting it`);
      const { rowCount } = await client.query("SELECT 1 FROM branches WHERE parent_id = $1 LIMIT 1", [
        branchId,
      ]);
      if (rowCount) throw conflict(`branch ${branchId} has child branches: delete them first`);
      const databases = (await databasesOf(client, branchId)).map((d) => d.physicalName);
      await retireUsage(client, plane.cluster, projectId, databases);
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
      return { result: branch, planned };
    },
  );
  return { branch: result, operations };
}
