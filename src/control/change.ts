import type pg from "pg";
import { type ProjectAccess, projectFor } from "./access.js";
import {
  getOperations,
  lockProjectForChange,
  type OperationRow,
  type PlannedOperation,
  scheduleOperations,
} from "./operations.js";
import type { Plane } from "./plane.js";
import type { Principal } from "./principal.js";
import { holdAgainstRevocation } from "./revocation-lock.js";
import { inTransaction } from "./sql.js";

export interface Change<T> {
  result: T;
  planned: PlannedOperation[];
}

/**
 * The shape of every change to a project: in one transaction, check the caller's access (and hold off
 * revocations, see revocation-lock.ts), lock the project
 * (423 while earlier operations are in progress), change the metadata and schedule the operations that
 * bring the cluster in line; then run them, waiting up to the configured time, and return their status.
 */
export async function changeProject<T>(
  plane: Plane,
  principal: Principal,
  projectId: string,
  work: (client: pg.PoolClient, access: ProjectAccess) => Promise<Change<T>>,
): Promise<{ result: T; operations: OperationRow[] }> {
  const { result, ids } = await inTransaction(plane.db, async (client) => {
    await holdAgainstRevocation(client, principal);
    const access = await projectFor(client, principal, projectId, true);
    await lockProjectForChange(client, projectId);
    const change = await work(client, access);
    const scheduled = await scheduleOperations(client, projectId, change.planned, plane.instanceId);
    return { result: change.result, ids: scheduled.map((op) => op.id) };
  });
  if (ids.length) await plane.awaitOperations(projectId);
  return { result, operations: await getOperations(plane.db, ids) };
}
