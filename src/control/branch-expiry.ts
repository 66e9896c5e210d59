import type { Logger } from "pino";
import { deletionRefusal, removeBranch } from "./branch-delete.js";
import { type PlannedOperation, projectsWithActiveOperations, scheduleOperations } from "./operations.js";
import type { Plane } from "./plane.js";
import { type BranchRow, toBranch } from "./rows.js";
import { inTransaction } from "./sql.js";

/** A branch the sweep deleted. */
export interface ExpiredBranch {
  projectId: string;
  branchId: string;
}

/**
 * Deletes the branches whose `expires_at` has passed, as Neon's background job does, through the normal
 * deletion (`removeBranch`): each gets its operations in its project's list (`suspend_compute` for its
 * endpoints, `delete_timeline`), its endpoints go and its databases are dropped for real.
 *
 * Several processes may sweep one metadata database at once. A project is handled under its row lock, taken
 * with SKIP LOCKED (a project another process or a change holds is left for the next sweep), and its expired
 * branches are read again under that lock, so each is deleted once. A project with operations in progress is
 * left for the next sweep too, as a change would get 423 then. A branch that may not be deleted (default,
 * protected, or a parent: the API refuses an expiry on those, but a restore can make an expiring branch a
 * parent) is skipped, logged once per process, and retried on every sweep.
 */
export class BranchExpiry {
  #reported = new Set<string>();

  constructor(
    private readonly plane: Pick<Plane, "db" | "cluster" | "instanceId" | "kick">,
    private readonly logger: Logger,
  ) {}

  /** Deletes what has expired (the children of a project before their parents); returns what it deleted. */
  async sweep(): Promise<ExpiredBranch[]> {
    const { rows } = await this.plane.db.query<{ project_id: string }>(
      "SELECT DISTINCT project_id FROM branches WHERE expires_at <= clock_timestamp()",
    );
    const deleted: ExpiredBranch[] = [];
    for (const { project_id: projectId } of rows) {
      try {
        const branchIds = await this.#sweepProject(projectId);
        if (!branchIds.length) continue;
        this.logger.info({ projectId, branches: branchIds }, "deleted expired branches");
        void this.plane.kick(projectId);
        for (const branchId of branchIds) deleted.push({ projectId, branchId });
      } catch (error) {
        this.logger.warn(
          { err: error, projectId },
          "deleting expired branches failed; retried on the next sweep",
        );
      }
    }
    return deleted;
  }

  async #sweepProject(projectId: string): Promise<string[]> {
    return inTransaction(this.plane.db, async (client) => {
      const { rowCount } = await client.query("SELECT 1 FROM projects WHERE id = $1 FOR UPDATE SKIP LOCKED", [
        projectId,
      ]);
      if (!rowCount) return [];
      if ((await projectsWithActiveOperations(client, [projectId])).size) return [];
      // Newest first: a child expiring with its parent goes first, and the parent can go after it.
      const { rows } = await client.query(
        `SELECT * FROM branches WHERE project_id = $1 AND expires_at <= clock_timestamp()
         ORDER BY created_at DESC, id FOR UPDATE`,
        [projectId],
      );
      const planned: PlannedOperation[] = [];
      const deleted: string[] = [];
      for (const branch of rows.map(toBranch)) {
        const refusal = await deletionRefusal(client, branch);
        if (refusal) {
          this.#reportSkipped(branch, refusal);
          continue;
        }
        planned.push(...(await removeBranch(client, this.plane.cluster, branch)));
        deleted.push(branch.id);
      }
      await scheduleOperations(client, projectId, planned, this.plane.instanceId);
      return deleted;
    });
  }

  #reportSkipped(branch: BranchRow, refusal: string): void {
    const key = `${branch.id} ${refusal}`;
    if (this.#reported.has(key)) return;
    this.#reported.add(key);
    this.logger.warn(
      { projectId: branch.projectId, branchId: branch.id, expiresAt: branch.expiresAt },
      `expired branch kept, retried on every sweep: ${refusal}`,
    );
  }
}
