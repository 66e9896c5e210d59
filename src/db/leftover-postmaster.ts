import { existsSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** Whether `pid` is a postgres process, where /proc can tell (a recycled pid must not be signalled). */
function isPostgres(pid: number): boolean {
  const cmdline = `/proc/${pid}/cmdline`;
  if (!existsSync("/proc/self/cmdline")) return true;
  try {
    return readFileSync(cmdline, "latin1").includes("postgres");
  } catch {
    return false;
  }
}

/**
 * Whether `pid` has exited but is not reaped yet (a zombie). It still answers kill(pid, 0), so PostgreSQL takes it
 * for a running postmaster and refuses to start; an init that reaps lazily (as in some micro-VMs) leaves one
 * behind for a while after a postmaster is killed.
 */
function isZombie(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "latin1");
    return stat[stat.lastIndexOf(")") + 2] === "Z";
  } catch {
    return false;
  }
}

async function exited(pid: number, withinMs: number): Promise<boolean> {
  for (const until = Date.now() + withinMs; Date.now() < until; await sleep(50)) if (!alive(pid)) return true;
  return !alive(pid);
}

/**
 * Stops the postmaster that `<clusterDir>/postmaster.pid` names when it is still running: a fast shutdown
 * (SIGINT: sessions are ended, the data is checkpointed), then an immediate one (SIGQUIT, crash recovery at
 * the next start) if it has not exited within 30 s. Returns its pid, or null when there was none to stop (a
 * pid file whose process is gone is PostgreSQL's own to clear). Only for a caller that owns the directory.
 */
export async function stopLeftoverPostmaster(clusterDir: string): Promise<number | null> {
  const file = join(clusterDir, "postmaster.pid");
  if (!existsSync(file)) return null;
  const [pidLine = "", dirLine = ""] = readFileSync(file, "utf8").split("\n");
  const pid = Number.parseInt(pidLine, 10);
  if (!Number.isInteger(pid) || pid <= 0 || pid === process.pid || !alive(pid)) return null;
  if (isZombie(pid)) {
    // Dead already (killed with everything else): wait for it to be reaped, so that PostgreSQL sees its pid
    // file as stale and goes through crash recovery.
    await exited(pid, 30_000);
    return null;
  }
  if (resolve(dirLine.trim()) !== resolve(clusterDir) || !isPostgres(pid)) return null;
  process.kill(pid, "SIGINT");
  if (await exited(pid, 30_000)) return pid;
  process.kill(pid, "SIGQUIT");
  if (await exited(pid, 10_000)) return pid;
  throw new Error(`the PostgreSQL left running in ${clusterDir} (pid ${pid}) did not stop`);
}
