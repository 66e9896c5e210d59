import { execFileSync } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";

/** The processes whose CPU time the benchmark attributes; absent ones count 0. */
export interface CpuSources {
  pgtollPid?: number;
  pgbouncerPid?: number;
  /** bench/node-relay.ts, the bare Node.js relay. */
  nodeRelayPid?: number;
  /** PostgreSQL's postmaster: its own time, its reaped backends' and its live backends'. */
  postmasterPid?: number;
}

/** Cumulative CPU seconds at one instant. */
export interface CpuSnapshot {
  machineBusy: number;
  pgtoll: number;
  pgbouncer: number;
  nodeRelay: number;
  /**
   * The kernel (system) part of `pgtoll`, `pgbouncer` and `nodeRelay`: a proxy's socket reads and writes. On
   * loopback a write also runs the receiver's TCP input and wakes it, so this is where the socket path shows;
   * the rest of a proxy's time is its own code. Only one proxy is under load at a time.
   */
  proxySystem: number;
  postgres: number;
  /** This process's reaped children: pgbench (the only child that ends during a measurement). */
  pgbench: number;
  runner: number;
  /**
   * Kernel threads (kworker, jbd2, ksoftirqd...) plus interrupt time: fsync and journal work of durable
   * commits lands here, whoever caused it.
   */
  kernel: number;
}

/** CPU seconds spent between two snapshots, per component; `other` is every other process of the machine. */
export type CpuSpent = CpuSnapshot & { other: number };

const TICKS_PER_SECOND = (() => {
  try {
    return Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).trim()) || 100;
  } catch {
    return 100;
  }
})();

/** Fields after the command name of /proc/<pid>/stat: [state, ppid, ...]; utime is index 11. */
function statFields(pid: number | string): string[] | null {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, "utf8");
    return text.slice(text.lastIndexOf(")") + 2).split(" ");
  } catch {
    return null;
  }
}

function ownTicks(fields: string[] | null): number {
  return fields ? Number(fields[11]) + Number(fields[12]) : 0;
}

function systemTicks(fields: string[] | null): number {
  return fields ? Number(fields[12]) : 0;
}

function reapedChildTicks(fields: string[] | null): number {
  return fields ? Number(fields[13]) + Number(fields[14]) : 0;
}

/** Busy ticks of the whole machine, and the part spent in interrupts. */
function machineTicks(): { busy: number; interrupts: number } {
  const line = readFileSync("/proc/stat", "utf8").split("\n")[0]!;
  // cpu user nice system idle iowait irq softirq steal ...
  const [user, nice, system, , , irq, softirq, steal] = line.trim().split(/\s+/).slice(1).map(Number);
  return { busy: user! + nice! + system! + irq! + softirq! + (steal ?? 0), interrupts: irq! + softirq! };
}

/** One pass over /proc: PostgreSQL's processes (postmaster and its children) and kernel threads. */
function scanProcesses(postmasterPid: number | undefined): { postgres: number; kernelThreads: number } {
  const postmaster = postmasterPid ? statFields(postmasterPid) : null;
  let postgres = ownTicks(postmaster) + reapedChildTicks(postmaster);
  let kernelThreads = 0;
  const parent = String(postmasterPid ?? -1);
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    const fields = statFields(entry);
    if (!fields) continue;
    if (fields[1] === parent) postgres += ownTicks(fields);
    else if (fields[1] === "2" || entry === "2") kernelThreads += ownTicks(fields);
  }
  return { postgres, kernelThreads };
}

/** Reads cumulative CPU time of every source (Linux /proc); zeros where /proc is not there. */
export function cpuSnapshot(sources: CpuSources): CpuSnapshot {
  try {
    const self = statFields("self");
    const seconds = (ticks: number) => ticks / TICKS_PER_SECOND;
    const machine = machineTicks();
    const processes = scanProcesses(sources.postmasterPid);
    const statOf = (pid: number | undefined) => (pid ? statFields(pid) : null);
    const pgtoll = statOf(sources.pgtollPid);
    const pgbouncer = statOf(sources.pgbouncerPid);
    const nodeRelay = statOf(sources.nodeRelayPid);
    return {
      machineBusy: seconds(machine.busy),
      pgtoll: seconds(ownTicks(pgtoll)),
      pgbouncer: seconds(ownTicks(pgbouncer)),
      nodeRelay: seconds(ownTicks(nodeRelay)),
      proxySystem: seconds(systemTicks(pgtoll) + systemTicks(pgbouncer) + systemTicks(nodeRelay)),
      postgres: seconds(processes.postgres),
      pgbench: seconds(reapedChildTicks(self)),
      runner: seconds(ownTicks(self)),
      kernel: seconds(processes.kernelThreads + machine.interrupts),
    };
  } catch {
    return noCpu();
  }
}

/** A snapshot of zeros: where /proc cannot be read, and a neutral value for tests. */
export function noCpu(): CpuSnapshot {
  return {
    machineBusy: 0,
    pgtoll: 0,
    pgbouncer: 0,
    nodeRelay: 0,
    proxySystem: 0,
    postgres: 0,
    pgbench: 0,
    runner: 0,
    kernel: 0,
  };
}

export function cpuSpent(before: CpuSnapshot, after: CpuSnapshot): CpuSpent {
  const d = (key: keyof CpuSnapshot) => Math.max(0, after[key] - before[key]);
  const spent = {
    machineBusy: d("machineBusy"),
    pgtoll: d("pgtoll"),
    pgbouncer: d("pgbouncer"),
    nodeRelay: d("nodeRelay"),
    proxySystem: d("proxySystem"),
    postgres: d("postgres"),
    pgbench: d("pgbench"),
    runner: d("runner"),
    kernel: d("kernel"),
  };
  // proxySystem is part of the proxies' own time: not added again.
  const ours =
    spent.pgtoll +
    spent.pgbouncer +
    spent.nodeRelay +
    spent.postgres +
    spent.pgbench +
    spent.runner +
    spent.kernel;
  return { ...spent, other: Math.max(0, spent.machineBusy - ours) };
}

/** Reads the postmaster's pid from a data directory's postmaster.pid (first line). */
export function postmasterPidOf(dataDir: string): number | undefined {
  try {
    const pid = Number(readFileSync(`${dataDir}/postmaster.pid`, "utf8").split("\n")[0]);
    return Number.isInteger(pid) && pid > 0 ? pid : undefined;
  } catch {
    return undefined;
  }
}
