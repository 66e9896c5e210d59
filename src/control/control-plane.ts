import type pg from "pg";
import type { Logger } from "pino";
import type { SecretBox } from "../providers/secret-box.js";
import { BranchExpiry } from "./branch-expiry.js";
import { connectProjectCluster, type ProjectCluster } from "./cluster.js";
import { sampleConsumption } from "./consumption.js";
import { processDropQueue } from "./drop-queue.js";
import { forgetEndedSessions } from "./endpoint-session-records.js";
import { InstanceLease } from "./instance-lease.js";
import { adoptOrphanedOperations, OperationRunner } from "./operation-runner.js";
import type { Plane } from "./plane.js";
import {
  type ControlSettings,
  DEFAULT_CONSUMPTION_SAMPLE_MS,
  DEFAULT_OPERATION_WAIT_MS,
  DEFAULT_SWEEP_INTERVAL_MS,
} from "./settings.js";
import { isolateTenants } from "./tenant-isolation.js";

/**
 * The management plane of one pgtoll process: the metadata database, the cluster that hosts projects, the
 * secret box that seals role passwords, and the runner of this process's operations. On start it takes over
 * the operations of processes that died (including this process's previous life), and keeps doing so, along
 * with finishing queued drops, forgetting the session records of processes that died and deleting expired
 * branches, every 10 seconds (`sweepIntervalMs`).
 */
export class ControlPlane implements Plane {
  /** When this process last sampled consumption (performance.now()); -Infinity: at the first sweep. */
  #lastSample = Number.NEGATIVE_INFINITY;
  readonly runner: OperationRunner;
  readonly branchExpiry: BranchExpiry;
  #sweeper: NodeJS.Timeout | undefined;
  #sweeping: Promise<void> | undefined;

  private constructor(
    readonly db: pg.Pool,
    readonly cluster: ProjectCluster,
    readonly box: SecretBox,
    readonly settings: ControlSettings,
    readonly logger: Logger,
    private readonly lease: InstanceLease,
  ) {
    this.runner = new OperationRunner(
      { db, cluster, box, fenceGraceMs: settings.fenceGraceMs },
      lease.id,
      logger,
    );
    this.branchExpiry = new BranchExpiry(this, logger);
  }

  static async start(
    db: pg.Pool,
    box: SecretBox,
    settings: ControlSettings,
    logger: Logger,
  ): Promise<ControlPlane> {
    const cluster = connectProjectCluster(settings.clusterUrl);
    let lease: InstanceLease;
    try {
      lease = await InstanceLease.acquire(db);
    } catch (error) {
      await cluster.close();
      throw error;
    }
    const plane = new ControlPlane(db, cluster, box, settings, logger, lease);
    // Before any operation runs: a pending one must find the roles under the names it reads.
    await isolateTenants(db, cluster, logger).catch((error: unknown) =>
      logger.error({ err: error }, "could not bring the cluster to the tenant-isolation layout"),
    );
    await plane.sweep();
    plane.#sweeper = setInterval(
      () => void plane.sweep(),
      settings.sweepIntervalMs ?? DEFAULT_SWEEP_INTERVAL_MS,
    );
    plane.#sweeper.unref();
    return plane;
  }

  get instanceId(): number {
    return this.lease.id;
  }

  get operationWaitMs(): number {
    return this.settings.operationWaitMs ?? DEFAULT_OPERATION_WAIT_MS;
  }

  /**
   * Takes over orphaned operations, retries queued drops and deletes expired branches. Never throws. A sweep
   * still running when the next is due is joined, not doubled.
   */
  sweep(): Promise<void> {
    this.#sweeping ??= this.#sweep().finally(() => {
      this.#sweeping = undefined;
    });
    return this.#sweeping;
  }

  async #sweep(): Promise<void> {
    try {
      const projects = await adoptOrphanedOperations(this.db, this.lease.id, (id) => this.lease.isAlive(id));
      if (projects.length) this.logger.warn({ projects }, "took over the operations of a stopped process");
      for (const project of projects) void this.runner.kick(project);
      await processDropQueue(this.db, this.cluster);
      await forgetEndedSessions(this.db, this.cluster.admin);
      await this.branchExpiry.sweep();
      const sampleEvery = this.settings.consumptionSampleMs ?? DEFAULT_CONSUMPTION_SAMPLE_MS;
      if (performance.now() - this.#lastSample >= sampleEvery) {
        this.#lastSample = performance.now();
        await sampleConsumption(this.db, this.cluster);
      }
    } catch (error) {
      this.logger.warn({ err: error }, "management sweep failed");
    }
  }

  /** Runs the project's operations and waits for them up to the configured time. */
  awaitOperations(projectId: string): Promise<void> {
    return this.runner.awaitOperations(projectId, this.operationWaitMs);
  }

  kick(projectId: string): Promise<void> {
    return this.runner.kick(projectId);
  }

  /**
   * Stops: waits for running operations, gives the lease up and closes the cluster pool. `abandon` does not
   * wait: operations are left as they are and their cluster work is cut off, as a crash would (tests use it to
   * check that another process takes them over).
   */
  async stop(options: { abandon?: boolean } = {}): Promise<void> {
    clearInterval(this.#sweeper);
    if (!options.abandon) await this.#sweeping;
    const stopped = this.runner.stop(options.abandon);
    if (!options.abandon) await stopped;
    this.lease.release();
    await this.cluster.close();
  }
}
