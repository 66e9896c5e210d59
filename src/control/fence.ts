import type { ProjectCluster } from "./cluster.js";
import { quoteIdent } from "./sql.js";

/** The moment a fenced database stopped changing: its copy holds every commit acknowledged before it. */
export interface CopyPoint {
  lsn: string;
  timestamp: Date;
}

export interface Fence extends CopyPoint {
  /** Lets clients connect again. Safe to call more than once. */
  release(): Promise<void>;
}

export interface FenceOptions {
  /** How long transactions in flight may run on before their sessions are ended. */
  graceMs: number;
  pollMs?: number;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Makes databases copyable with `CREATE DATABASE … TEMPLATE`, which PostgreSQL allows only while nobody is
 * connected to the template:
 * 1. new connections are refused (`ALLOW_CONNECTIONS false`; clients retry, see docs/management-api.md);
 * 2. each session is ended as soon as it is idle *between* transactions, so no transaction is cut short;
 * 3. after `graceMs`, sessions still inside a transaction are ended too (their uncommitted work rolls back,
 *    as on any disconnect; nothing committed is ever lost).
 * When no session is left, nothing can commit any more: the WAL position and time returned are the copy
 * point. The caller copies, then calls `release()`.
 */
export async function fenceDatabases(
  cluster: ProjectCluster,
  databases: readonly string[],
  options: FenceOptions,
): Promise<Fence> {
  const names = [...databases];
  let released = false;
  const release = async () => {
    if (released) return;
    released = true;
    for (const name of names) {
      await cluster.admin.query(`ALTER DATABASE ${quoteIdent(name)} ALLOW_CONNECTIONS true`).catch(() => {});
    }
  };
  try {
    for (const name of names)
      await cluster.admin.query(`ALTER DATABASE ${quoteIdent(name)} ALLOW_CONNECTIONS false`);
    const deadline = Date.now() + options.graceMs;
    for (;;) {
      const { rows } = await cluster.admin.query<{ pid: number; state: string | null }>(
        `SELECT pid, state FROM pg_stat_activity
         WHERE datname = ANY($1) AND pid <> pg_backend_pid() AND backend_type = 'client backend'`,
        [names],
      );
      if (!rows.length) break;
      const late = Date.now() >= deadline;
      const victims = rows.filter((row) => late || row.state === "idle").map((row) => row.pid);
      if (victims.length) {
        await cluster.admin.query("SELECT pg_terminate_backend(pid, 5000) FROM unnest($1::int[]) AS pid", [
          victims,
        ]);
      } else {
        await sleep(options.pollMs ?? 10);
      }
    }
    const { rows } = await cluster.admin.query(
      "SELECT pg_current_wal_lsn()::text AS lsn, clock_timestamp() AS at",
    );
    return { lsn: rows[0].lsn, timestamp: rows[0].at, release };
  } catch (error) {
    await release();
    throw error;
  }
}
