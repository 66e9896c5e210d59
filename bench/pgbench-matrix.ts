import { cpus } from "node:os";
import { performance } from "node:perf_hooks";
import type { PgEndpoint } from "./bench-cluster.js";
import { type CpuSnapshot, type CpuSpent, cpuSpent } from "./cpu-usage.js";
import { type PgbenchScript, type Protocol, runPgbench } from "./pgbench.js";
import { type LatencySummary, type Spread, spread, summariseLatency } from "./stats.js";

/**
 * `pgtoll-free` and `pgtoll-priced`: the same pgtoll process and agent as `pgtoll`, through a provider on the same
 * database that charges nothing (nothing metered), or one priced on every dimension (bench/priced-provider.ts).
 */
export type TargetName = "direct" | "pgbouncer" | "node-relay" | "pgtoll" | "pgtoll-priced" | "pgtoll-free";

export interface PgbenchTarget {
  name: TargetName;
  endpoint: PgEndpoint;
  /** Client counts this target runs at, among the matrix's (every one when absent): a target measured in a few cells. */
  clients?: readonly number[];
}

/** One (target, clients, protocol) cell: TPS over the repetitions and latency pooled over them. */
export interface PgbenchCell {
  target: TargetName;
  script: PgbenchScript;
  clients: number;
  protocol: Protocol;
  tps: Spread;
  latency: LatencySummary;
  transactions: number;
  /**
   * CPU microseconds per transaction by process over the measured runs (pgbench included), and how busy
   * the whole machine was (1 = every core); `other` is CPU used by processes outside the benchmark.
   */
  cpuUsPerTransaction: Record<keyof CpuSpent, number>;
  machineUtilisation: number;
  /** Repetitions that failed (their numbers are left out); `error` quotes the first failure. */
  failedRuns: number;
  /** Why pgbench failed (e.g. pgtoll denied a statement, or closed a session): pgbench's own message. */
  error?: string;
}

export interface MatrixOptions {
  pgbench: string;
  script: PgbenchScript;
  targets: PgbenchTarget[];
  clients: number[];
  protocols: Protocol[];
  runs: number;
  durationS: number;
  warmupS: number;
  maxThreads: number;
  scratchDir: string;
  /** Cumulative CPU time of the processes involved, read before and after each run. */
  sampleCpu(): CpuSnapshot;
  log(line: string): void;
}

/**
 * Runs pgbench for every (clients, protocol, target), `runs` times; a target with `clients` of its own runs at those
 * only. Targets are interleaved inside each repetition (direct, pgbouncer, node-relay, pgtoll, direct, ...) so that
 * drift over the run (ledger growth, page cache, thermal) lands on all of them alike. A failed repetition is counted
 * and left out of the numbers.
 */
export async function runPgbenchMatrix(options: MatrixOptions): Promise<PgbenchCell[]> {
  const cells = new Map<
    string,
    { cell: PgbenchCell; tps: number[]; latencies: Float64Array[]; cpu: CpuSpent[]; wallS: number }
  >();
  const keyOf = (target: TargetName, clients: number, protocol: Protocol) =>
    `${target}/${clients}/${protocol}`;
  const runsAt = (target: PgbenchTarget, clients: number) => target.clients?.includes(clients) ?? true;
  for (const target of options.targets) {
    for (const clients of options.clients.filter((c) => runsAt(target, c))) {
      for (const protocol of options.protocols) {
        cells.set(keyOf(target.name, clients, protocol), {
          cell: {
            target: target.name,
            script: options.script,
            clients,
            protocol,
            tps: spread([]),
            latency: { p50Us: Number.NaN, p99Us: Number.NaN, samples: 0 },
            transactions: 0,
            cpuUsPerTransaction: perTransaction([], 0),
            machineUtilisation: Number.NaN,
            failedRuns: 0,
          },
          tps: [],
          latencies: [],
          cpu: [],
          wallS: 0,
        });
      }
    }
  }
  const common = { script: options.script, maxThreads: options.maxThreads, scratchDir: options.scratchDir };

  // Warm-up (unmeasured): page cache, PostgreSQL's caches, the JIT of pgtoll's hot paths.
  const warmClients = (target: PgbenchTarget) =>
    Math.max(...options.clients.filter((c) => c <= 10 && runsAt(target, c)), 1);
  for (const target of options.targets) {
    if (!options.clients.some((c) => runsAt(target, c))) continue;
    for (const protocol of options.protocols) {
      await runPgbench(options.pgbench, target.endpoint, {
        ...common,
        protocol,
        clients: warmClients(target),
        durationS: options.warmupS,
      }).catch(() => {});
    }
  }

  for (let run = 1; run <= options.runs; run++) {
    for (const clients of options.clients) {
      for (const protocol of options.protocols) {
        for (const target of options.targets) {
          const entry = cells.get(keyOf(target.name, clients, protocol));
          if (!entry) continue;
          const label = `${options.script} ${target.name.padEnd(13)} c=${String(clients).padEnd(3)} ${protocol.padEnd(8)} run ${run}/${options.runs}`;
          try {
            const before = options.sampleCpu();
            const started = performance.now();
            const result = await runPgbench(options.pgbench, target.endpoint, {
              ...common,
              protocol,
              clients,
              durationS: options.durationS,
            });
            entry.wallS += (performance.now() - started) / 1000;
            entry.cpu.push(cpuSpent(before, options.sampleCpu()));
            entry.tps.push(result.tps);
            entry.latencies.push(result.latenciesUs);
            entry.cell.transactions += result.transactions;
            options.log(`${label}: ${result.tps.toFixed(0)} tps`);
          } catch (error) {
            const detail = (error as { detail?: string }).detail;
            const message = detail ? `${(error as Error).message}: ${detail}` : (error as Error).message;
            entry.cell.failedRuns++;
            entry.cell.error ??= message;
            options.log(`${label}: FAILED ${message}`);
          }
        }
      }
    }
  }

  return [...cells.values()].map(({ cell, tps, latencies, cpu, wallS }) => ({
    ...cell,
    tps: spread(tps),
    latency: summariseLatency(latencies),
    cpuUsPerTransaction: perTransaction(cpu, cell.transactions),
    machineUtilisation: cpu.reduce((sum, c) => sum + c.machineBusy, 0) / wallS / cpus().length,
  }));
}

/** Every CPU component, checked by the compiler against CpuSpent so that a new one cannot be left out. */
const CPU_KEYS = Object.keys({
  machineBusy: true,
  pgtoll: true,
  pgbouncer: true,
  nodeRelay: true,
  proxySystem: true,
  postgres: true,
  pgbench: true,
  runner: true,
  kernel: true,
  other: true,
} satisfies Record<keyof CpuSpent, true>) as (keyof CpuSpent)[];

/** Sums CPU seconds over runs and divides by transactions, in microseconds. */
function perTransaction(spent: CpuSpent[], transactions: number): Record<keyof CpuSpent, number> {
  const out = {} as Record<keyof CpuSpent, number>;
  for (const key of CPU_KEYS) {
    const seconds = spent.reduce((sum, c) => sum + c[key], 0);
    out[key] = transactions > 0 ? (seconds * 1e6) / transactions : Number.NaN;
  }
  return out;
}
