import type pg from "pg";
import type { SecretBox } from "../providers/secret-box.js";
import type { ProjectCluster } from "./cluster.js";
import { processDropQueue, queueDrops } from "./drop-queue.js";
import { endEndpointSessions, endRoleSessions, endSessionsOutsideAllowlist } from "./endpoint-sessions.js";
import { fenceDatabases } from "./fence.js";
import type { Step } from "./operations.js";
import {
  copyPhysicalDatabase,
  ensurePhysicalDatabase,
  grantConnect,
  restrictConnections,
  setPhysicalOwner,
} from "./physical-databases.js";
import { detachPhysicalRole, ensurePhysicalRole, setPhysicalPassword } from "./physical-roles.js";
import { removeData } from "./schema-only-reset.js";

export interface StepContext {
  db: pg.Pool;
  cluster: ProjectCluster;
  box: SecretBox;
  /** How long a branch copy lets the parent's open transactions finish (fence.ts). */
  fenceGraceMs: number;
}

/** The branch's databases with their owners' real role names. */
async function branchDatabases(ctx: StepContext, branchId: string) {
  const { rows } = await ctx.db.query<{
    name: string;
    physical_name: string;
    owner: string;
    project_id: string;
  }>(
    `SELECT d.name, d.physical_name, pr.physical_name AS owner, b.project_id FROM branch_databases d
     JOIN branches b ON b.id = d.branch_id
     JOIN project_roles pr ON pr.project_id = b.project_id AND pr.name = d.owner_name
     WHERE d.branch_id = $1 ORDER BY d.id`,
    [branchId],
  );
  return rows;
}

async function branchRoles(ctx: StepContext, branchId: string) {
  const { rows } = await ctx.db.query<{
    physical_name: string;
    password_sealed: string | null;
    no_login: boolean;
  }>(
    `SELECT pr.physical_name, pr.password_sealed, pr.no_login FROM branch_roles br
     JOIN project_roles pr ON pr.project_id = br.project_id AND pr.name = br.name WHERE br.branch_id = $1`,
    [branchId],
  );
  return rows;
}

async function markBranchReady(
  ctx: StepContext,
  branchId: string,
  point?: { lsn: string; timestamp: Date },
  reset = false,
) {
  await ctx.db.query(
    `UPDATE branches SET current_state = 'ready', pending_state = NULL, state_changed_at = clock_timestamp(),
       updated_at = clock_timestamp(), parent_lsn = coalesce($2, parent_lsn), parent_timestamp = coalesce($3, parent_timestamp),
       last_reset_at = CASE WHEN $4 THEN clock_timestamp() ELSE last_reset_at END
     WHERE id = $1`,
    [branchId, point?.lsn ?? null, point?.timestamp ?? null, reset],
  );
}

/**
 * Executes one step. Every step converges when run again after a crash part-way (the runner re-runs the
 * operations of a process that died): roles and databases are created "if missing", copies start by dropping
 * a half-made target, and fences are lifted whatever happens.
 */
export async function runStep(step: Step, ctx: StepContext): Promise<void> {
  switch (step.kind) {
    case "provision_branch": {
      const roles = await branchRoles(ctx, step.branchId);
      for (const role of roles) {
        await ensurePhysicalRole(
          ctx.cluster,
          role.physical_name,
          role.no_login ? null : ctx.box.open(role.password_sealed ?? ""),
        );
      }
      for (const database of await branchDatabases(ctx, step.branchId)) {
        await ensurePhysicalDatabase(ctx.cluster, database.physical_name, database.owner);
        await restrictConnections(
          ctx.cluster,
          database.physical_name,
          roles.map((role) => role.physical_name),
        );
      }
      await markBranchReady(ctx, step.branchId);
      return;
    }
    case "copy_branch": {
      const parent = new Map(
        (await branchDatabases(ctx, step.parentId)).map((d) => [d.name, d.physical_name]),
      );
      const children = await branchDatabases(ctx, step.branchId);
      const roles = (await branchRoles(ctx, step.branchId)).map((role) => role.physical_name);
      const fence = await fenceDatabases(ctx.cluster, [...parent.values()], { graceMs: ctx.fenceGraceMs });
      try {
        for (const child of children) {
          const source = parent.get(child.name);
          if (!source) throw new Error(`parent branch ${step.parentId} has no database ${child.name}`);
          await copyPhysicalDatabase(ctx.cluster, source, child.physical_name, child.owner);
        }
      } finally {
        await fence.release();
      }
      for (const child of children) {
        await restrictConnections(ctx.cluster, child.physical_name, roles);
        if (step.initSource === "schema-only") await removeData(ctx.cluster, child.physical_name);
      }
      await markBranchReady(ctx, step.branchId, fence);
      return;
    }
    case "restore_branch": {
      const roles = (await branchRoles(ctx, step.branchId)).map((role) => role.physical_name);
      const fence = await fenceDatabases(
        ctx.cluster,
        step.copies.map((copy) => copy.source),
        { graceMs: ctx.fenceGraceMs },
      );
      try {
        for (const copy of step.copies)
          await copyPhysicalDatabase(ctx.cluster, copy.source, copy.target, copy.owner);
      } finally {
        await fence.release();
      }
      for (const copy of step.copies) await restrictConnections(ctx.cluster, copy.target, roles);
      await queueDrops(
        ctx.db,
        step.replaced.map((physicalName) => ({ kind: "database" as const, physicalName })),
      );
      await processDropQueue(ctx.db, ctx.cluster);
      await markBranchReady(ctx, step.branchId, fence, true);
      return;
    }
    case "drop_queued":
      await processDropQueue(ctx.db, ctx.cluster);
      return;
    case "create_database": {
      const { rows } = await ctx.db.query("SELECT branch_id, name FROM branch_databases WHERE id = $1", [
        step.databaseId,
      ]);
      if (!rows[0]) return;
      const database = (await branchDatabases(ctx, rows[0].branch_id)).find((d) => d.name === rows[0].name)!;
      const roles = (await branchRoles(ctx, rows[0].branch_id)).map((role) => role.physical_name);
      await ensurePhysicalDatabase(ctx.cluster, database.physical_name, database.owner);
      await restrictConnections(ctx.cluster, database.physical_name, roles);
      return;
    }
    case "set_database_owner": {
      const { rows } = await ctx.db.query(
        `SELECT d.physical_name, pr.physical_name AS owner FROM branch_databases d JOIN branches b ON b.id = d.branch_id
         JOIN project_roles pr ON pr.project_id = b.project_id AND pr.name = d.owner_name WHERE d.id = $1`,
        [step.databaseId],
      );
      if (rows[0]) await setPhysicalOwner(ctx.cluster, rows[0].physical_name, rows[0].owner);
      return;
    }
    case "create_role": {
      const { rows } = await ctx.db.query(
        "SELECT physical_name, password_sealed, no_login FROM project_roles WHERE project_id = (SELECT project_id FROM branches WHERE id = $1) AND name = $2",
        [step.branchId, step.name],
      );
      if (!rows[0]) return;
      await ensurePhysicalRole(
        ctx.cluster,
        rows[0].physical_name,
        rows[0].no_login ? null : ctx.box.open(rows[0].password_sealed),
      );
      const databases = (await branchDatabases(ctx, step.branchId)).map((d) => d.physical_name);
      await grantConnect(ctx.cluster, databases, rows[0].physical_name);
      return;
    }
    case "detach_role":
      await detachPhysicalRole(ctx.cluster, step.physicalName, step.databases);
      await processDropQueue(ctx.db, ctx.cluster);
      return;
    case "set_password": {
      const { rows } = await ctx.db.query(
        "SELECT physical_name, password_sealed FROM project_roles WHERE project_id = $1 AND name = $2",
        [step.projectId, step.name],
      );
      if (rows[0]?.password_sealed) {
        await setPhysicalPassword(ctx.cluster, rows[0].physical_name, ctx.box.open(rows[0].password_sealed));
        // The old password opened these sessions: none outlives it, through pgtoll or not.
        await endRoleSessions(ctx.cluster, rows[0].physical_name);
      }
      return;
    }
    case "start_endpoint":
      await ctx.db.query(
        `UPDATE endpoints SET current_state = 'active', pending_state = NULL, started_at = clock_timestamp(),
           last_active = clock_timestamp(), updated_at = clock_timestamp() WHERE id = $1`,
        [step.endpointId],
      );
      return;
    case "suspend_endpoint":
      await ctx.db.query(
        `UPDATE endpoints SET current_state = 'idle', pending_state = NULL, suspended_at = clock_timestamp(),
           updated_at = clock_timestamp() WHERE id = $1`,
        [step.endpointId],
      );
      await endEndpointSessions(ctx, step.endpointId);
      return;
    case "end_disallowed_sessions":
      await endSessionsOutsideAllowlist(ctx, step.projectId);
      return;
    case "noop":
      return;
  }
}
