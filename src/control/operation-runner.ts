import type pg from "pg";
import type { Logger } from "pino";
import { runStep, type StepContext } from "./operation-steps.js";
import type { Step } from "./operations.js";

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms).unref());

/**
 * Runs the operations this process scheduled (or took over), one project at a time and in order within a
 * project. An operation moves scheduling -> running -> finished, or failed (with its error), in which case
 * the operations scheduled after it in the same project are cancelled. Every transition is written to the
 * metadata database, so operations can be polled from any process and survive a restart.
 */
export class OperationRunner {
  #drains = new Map<string, Promise<void>>();
  #again = new Set<string>();
  #stopped = false;

  constructor(
    private readonly ctx: StepContext,
    private readonly instanceId: number,
    private readonly logger: Logger,
  ) {}

  /** Starts (or continues) running the project's operations; resolves when none of ours is left. */
  kick(projectId: string): Promise<void> {
    const current = this.#drains.get(projectId);
    if (current) {
      this.#again.add(projectId);
      return current;
    }
    const run = (async () => {
      do {
        this.#again.delete(projectId);
        await this.#drain(projectId);
      } while (this.#again.has(projectId) && !this.#stopped);
    })()
      .catch((error) => this.logger.error({ err: error, projectId }, "operation runner failed"))
      .finally(() => this.#drains.delete(projectId));
    this.#drains.set(projectId, run);
    return run;
  }

  /** Waits for the project's operations up to `ms`; the caller then answers with their current status. */
  async awaitOperations(projectId: string, ms: number): Promise<void> {
    const running = this.kick(projectId);
    if (ms > 0) await Promise.race([running, sleep(ms)]);
  }

  /** Stops taking new operations and waits for the ones running now (unless `abandon`). */
  async stop(abandon = false): Promise<void> {
    this.#stopped = true;
    if (!abandon) await Promise.allSettled(this.#drains.values());
  }

  async #drain(projectId: string): Promise<void> {
    const db: pg.Pool = this.ctx.db;
    while (!this.#stopped) {
      const { rows } = await db.query<{ id: string; step: Step; action: string }>(
        `SELECT id, step, action FROM operations WHERE project_id = $1 AND instance_id = $2
           AND status IN ('scheduling', 'running') ORDER BY seq LIMIT 1`,
        [projectId, this.instanceId],
      );
      const op = rows[0];
      if (!op) return;
      await db.query(
        `UPDATE operations SET status = 'running', started_at = coalesce(started_at, clock_timestamp()),
           updated_at = clock_timestamp() WHERE id = $1 AND instance_id = $2`,
        [op.id, this.instanceId],
      );
      try {
        await runStep(op.step, this.ctx);
        await db.query(
          `UPDATE operations SET status = 'finished', updated_at = clock_timestamp(),
             total_duration_ms = (extract(epoch FROM clock_timestamp() - started_at) * 1000)::int
           WHERE id = $1 AND instance_id = $2 AND status = 'running'`,
          [op.id, this.instanceId],
        );
      } catch (error) {
        if (this.#stopped) return;
        const message = error instanceof Error ? error.message : String(error);
        this.logger.error({ err: error, operation: op.id, action: op.action }, "operation failed");
        await db.query(
          `UPDATE operations SET status = 'failed', error = $3, failures_count = failures_count + 1,
             updated_at = clock_timestamp(), total_duration_ms = (extract(epoch FROM clock_timestamp() - started_at) * 1000)::int
           WHERE id = $1 AND instance_id = $2`,
          [op.id, this.instanceId, message],
        );
        await db.query(
          `UPDATE operations SET status = 'cancelled', updated_at = clock_timestamp()
           WHERE project_id = $1 AND instance_id = $2 AND status = 'scheduling'`,
          [projectId, this.instanceId],
        );
      }
    }
  }
}

/**
 * Takes over the operations of control instances that are gone (their lease lock is free): they become this
 * instance's, back to `scheduling` (a `running` one counts as a failure), and are run again from the start,
 * which every step supports. Returns the projects whose operations were taken over.
 */
export async function adoptOrphanedOperations(
  db: pg.Pool,
  instanceId: number,
  isAlive: (instanceId: number) => Promise<boolean>,
): Promise<string[]> {
  const { rows } = await db.query<{ instance_id: number | null }>(
    `SELECT DISTINCT instance_id FROM operations
     WHERE status IN ('scheduling', 'running') AND instance_id IS DISTINCT FROM $1`,
    [instanceId],
  );
  const projects = new Set<string>();
  for (const { instance_id: owner } of rows) {
    if (owner !== null && (await isAlive(owner))) continue;
    const adopted = await db.query<{ project_id: string }>(
      `UPDATE operations SET instance_id = $1, status = 'scheduling', updated_at = clock_timestamp(),
         failures_count = failures_count + CASE WHEN status = 'running' THEN 1 ELSE 0 END
       WHERE instance_id IS NOT DISTINCT FROM $2 AND status IN ('scheduling', 'running') RETURNING project_id`,
      [instanceId, owner],
    );
    for (const row of adopted.rows) projects.add(row.project_id);
  }
  return [...projects];
}
