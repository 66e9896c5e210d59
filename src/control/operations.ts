import { randomUUID } from "node:crypto";
import { badRequest, locked, notFound } from "./control-error.js";
import type { Queryable } from "./sql.js";

/** What an operation does on the cluster; the runner (operation-steps.ts) executes it. */
export type Step =
  | { kind: "provision_branch"; branchId: string }
  | { kind: "copy_branch"; branchId: string; parentId: string; initSource: "parent-data" | "schema-only" }
  | {
      kind: "restore_branch";
      branchId: string;
      copies: { source: string; target: string; owner: string }[];
      /** The branch's databases before the restore, dropped once it is done (unless preserved). */
      replaced: string[];
    }
  | { kind: "drop_queued" }
  | { kind: "create_database"; databaseId: number }
  | { kind: "set_database_owner"; databaseId: number }
  | { kind: "create_role"; branchId: string; name: string }
  | { kind: "detach_role"; physicalName: string; databases: string[] }
  | { kind: "set_password"; projectId: string; name: string }
  | { kind: "start_endpoint"; endpointId: string }
  | { kind: "suspend_endpoint"; endpointId: string }
  /** Ends the sessions of the project's endpoints that its allowlist, as it is now, no longer admits. */
  | { kind: "end_disallowed_sessions"; projectId: string }
  | { kind: "noop" };

/** Neon's names for what an operation does (the `action` field). */
export type OperationAction =
  | "create_timeline"
  | "create_branch"
  | "delete_timeline"
  | "start_compute"
  | "suspend_compute"
  | "apply_config";

export type OperationStatus = "scheduling" | "running" | "finished" | "failed" | "cancelled" | "skipped";

export interface PlannedOperation {
  action: OperationAction;
  branchId?: string;
  endpointId?: string;
  step: Step;
}

export interface OperationRow {
  id: string;
  projectId: string;
  branchId: string | null;
  endpointId: string | null;
  action: OperationAction;
  status: OperationStatus;
  error: string | null;
  failuresCount: number;
  createdAt: Date;
  updatedAt: Date;
  totalDurationMs: number;
}

const COLUMNS = `id, project_id, branch_id, endpoint_id, action, status, error, failures_count, created_at, updated_at,
  CASE WHEN status = 'running' THEN (extract(epoch FROM clock_timestamp() - started_at) * 1000)::int
       ELSE total_duration_ms END AS total_duration_ms`;

const toOperation = (r: Record<string, unknown>): OperationRow => ({
  id: r.id as string,
  projectId: r.project_id as string,
  branchId: (r.branch_id as string | null) ?? null,
  endpointId: (r.endpoint_id as string | null) ?? null,
  action: r.action as OperationAction,
  status: r.status as OperationStatus,
  error: (r.error as string | null) ?? null,
  failuresCount: r.failures_count as number,
  createdAt: r.created_at as Date,
  updatedAt: r.updated_at as Date,
  totalDurationMs: (r.total_duration_ms as number) ?? 0,
});

export const ACTIVE_STATUSES = ["scheduling", "running"] as const;

/**
 * Call first in the transaction of any change that schedules operations: locks the project row (so two such
 * changes serialise) and answers 423 Locked while operations of the project are still scheduled or running,
 * as Neon does for conflicting concurrent changes.
 */
export async function lockProjectForChange(db: Queryable, projectId: string): Promise<void> {
  await db.query("SELECT id FROM projects WHERE id = $1 FOR UPDATE", [projectId]);
  const { rows } = await db.query(
    "SELECT id, action FROM operations WHERE project_id = $1 AND status IN ('scheduling', 'running') ORDER BY seq LIMIT 1",
    [projectId],
  );
  if (rows[0]) {
    throw locked(
      `project ${projectId} has operations in progress (${rows[0].action} ${rows[0].id}): retry when they have finished`,
    );
  }
}

/** Records operations, in execution order, for this process (`instanceId`) to run. */
export async function scheduleOperations(
  db: Queryable,
  projectId: string,
  planned: readonly PlannedOperation[],
  instanceId: number,
): Promise<OperationRow[]> {
  const scheduled: OperationRow[] = [];
  for (const op of planned) {
    const { rows } = await db.query(
      `INSERT INTO operations (id, project_id, branch_id, endpoint_id, action, status, step, instance_id)
       VALUES ($1, $2, $3, $4, $5, 'scheduling', $6, $7) RETURNING ${COLUMNS}`,
      [
        randomUUID(),
        projectId,
        op.branchId ?? null,
        op.endpointId ?? null,
        op.action,
        JSON.stringify(op.step),
        instanceId,
      ],
    );
    scheduled.push(toOperation(rows[0]));
  }
  return scheduled;
}

export async function getOperations(db: Queryable, ids: readonly string[]): Promise<OperationRow[]> {
  if (!ids.length) return [];
  const { rows } = await db.query(
    `SELECT ${COLUMNS} FROM operations WHERE id = ANY($1::uuid[]) ORDER BY seq`,
    [ids],
  );
  return rows.map(toOperation);
}

export async function getOperation(
  db: Queryable,
  projectId: string,
  operationId: string,
): Promise<OperationRow> {
  const uuid = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(operationId);
  const { rows } = uuid
    ? await db.query(`SELECT ${COLUMNS} FROM operations WHERE project_id = $1 AND id = $2`, [
        projectId,
        operationId,
      ])
    : { rows: [] };
  if (!rows[0]) throw notFound(`operation ${operationId} not found`);
  return toOperation(rows[0]);
}

/** Newest first; the cursor is the `seq` of the last operation of the previous page. */
export async function listOperations(
  db: Queryable,
  projectId: string,
  options: { cursor?: string; limit?: number },
): Promise<{ operations: OperationRow[]; cursor: string | null }> {
  const limit = Math.min(Math.max(options.limit ?? 10, 1), 1000);
  let before = Number.MAX_SAFE_INTEGER.toString();
  if (options.cursor !== undefined) {
    if (!/^\d{1,18}$/.test(options.cursor))
      throw badRequest("invalid cursor: pass pagination.cursor of the previous page as is");
    before = options.cursor;
  }
  const { rows } = await db.query(
    `SELECT ${COLUMNS}, seq FROM operations WHERE project_id = $1 AND seq < $2 ORDER BY seq DESC LIMIT $3`,
    [projectId, before, limit],
  );
  const last = rows[rows.length - 1];
  return { operations: rows.map(toOperation), cursor: last ? String(last.seq) : null };
}

/** Whether the project has operations scheduled or running (Neon's `locked`). */
export async function projectsWithActiveOperations(
  db: Queryable,
  projectIds: readonly string[],
): Promise<Set<string>> {
  if (!projectIds.length) return new Set();
  const { rows } = await db.query(
    "SELECT DISTINCT project_id FROM operations WHERE project_id = ANY($1::text[]) AND status IN ('scheduling', 'running')",
    [projectIds],
  );
  return new Set(rows.map((row) => row.project_id as string));
}
