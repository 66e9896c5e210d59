import { join } from "node:path";
import autocannon, { type AutocannonRequest } from "autocannon";
import { type CpuSnapshot, type CpuSpent, cpuSpent } from "./cpu-usage.js";
import { spawnNodeUntilReady, stopChild } from "./ready-child.js";
import { type LatencySummary, type Spread, spread, summariseLatency } from "./stats.js";

/** The statement both servers run: pgbench's select-only query, with a bound parameter. */
export const REST_SQL = "SELECT abalance FROM pgbench_accounts WHERE aid = $1";

export interface RestSide {
  /**
   * `pgtoll-free`: the same pgtoll process and agent through a provider priced at 0 (no hold, no charge).
   * `hand-metered`: a bare route that meters by hand on the ledger database (bench/hand-metered-server.ts).
   */
  name: "baseline" | "hand-metered" | "pgtoll" | "pgtoll-free";
  url: string;
  rps: Spread;
  latency: LatencySummary;
  requests: number;
  /** Non-2xx responses and socket errors over all repetitions (any makes the numbers suspect). */
  failures: number;
  /** CPU microseconds per request: the server process, PostgreSQL, autocannon (this process), the rest. */
  cpuUsPerRequest: {
    server: number;
    /** The system (kernel) part of `server`: its socket syscalls. */
    serverSystem: number;
    postgres: number;
    autocannon: number;
    kernel: number;
    other: number;
  };
  /**
   * Transactions committed in the ledger's database per request while this side ran (its charge batches and
   * hold top-ups; about 0 for the baseline and at price 0): the inverse of how many charges share a commit.
   */
  ledgerCommitsPerRequest: number;
  /** pgtoll's REST charge batches while this side ran: how many, and their mean time to write (ms). */
  chargeBatches: { count: number; meanMs: number };
  error?: string;
}

export interface RestResult {
  sql: string;
  connections: number;
  poolSize: number;
  sides: RestSide[];
}

export interface RestOptions {
  root: string;
  scratchDir: string;
  pgtollHttpUrl: string;
  pgtollPid: number;
  /** The provider's database, for the baseline's own pool. */
  dataUrl: string;
  /** pgtoll's ledger database, where the hand-metered side keeps its balance and entries. */
  ledgerUrl: string;
  agentWallet: string;
  providerId: string;
  /** A provider of the same database priced at 0: what the gateway costs without its metering. */
  freeProviderId: string;
  accounts: number;
  /** Cumulative CPU of PostgreSQL and of the given server process (reported as `pgtoll`). */
  sampleCpu(serverPid: number): CpuSnapshot;
  connections: number;
  poolSize: number;
  runs: number;
  durationS: number;
  warmupS: number;
  log(line: string): void;
  /** The ledger database's count of committed transactions (pg_stat_database.xact_commit). */
  ledgerCommits(): Promise<number>;
  /** When set, the baseline and hand-metered servers run with `--cpu-prof` into this directory. */
  cpuProfileDir?: string;
}

/** The REST charge writer's batches so far, from pgtoll's /metrics (`baseline` has none: zeros). */
async function restChargeBatches(url: string): Promise<{ count: number; seconds: number }> {
  const response = await fetch(`${url}/metrics`).catch(() => undefined);
  const text = response?.ok ? await response.text() : "";
  const value = (name: string) =>
    Number(new RegExp(`^${name}\\{writer="rest"\\} (\\S+)$`, "m").exec(text)?.[1] ?? 0);
  return {
    count: value("pgtoll_ledger_write_duration_seconds_count"),
    seconds: value("pgtoll_ledger_write_duration_seconds_sum"),
  };
}

/** PostgreSQL publishes a busy backend's transaction counts at most once a second. */
const STATS_DELAY_MS = 1100;

function randomAid(accounts: number): number {
  return 1 + Math.floor(Math.random() * accounts);
}

/** One autocannon measurement; latencies are taken from every response (ms, hrtime) rather than its histogram. */
async function measure(
  url: string,
  body: (aid: number) => string,
  accounts: number,
  connections: number,
  durationS: number,
) {
  const request: AutocannonRequest = {
    method: "POST",
    path: "/api/query",
    headers: { "content-type": "application/json" },
    setupRequest: (req) => ({ ...req, body: body(randomAid(accounts)) }),
  };
  const latenciesUs: number[] = [];
  let failures = 0;
  const instance = autocannon({ url, connections, duration: durationS, requests: [request], timeout: 30 });
  instance.on("response", (_client: unknown, statusCode: number, _bytes: number, responseTimeMs: number) => {
    if (statusCode >= 200 && statusCode < 300) latenciesUs.push(responseTimeMs * 1000);
    else failures++;
  });
  const result = await instance;
  const ok = latenciesUs.length;
  return {
    rps: ok / result.duration,
    latenciesUs: Float64Array.from(latenciesUs),
    requests: ok,
    failures: failures + result.errors + result.timeouts,
  };
}

/** Checks one request by hand first, so a misconfigured side fails with its response instead of a 0 in the table. */
async function probe(url: string, body: string): Promise<void> {
  const response = await fetch(`${url}/api/query`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body,
  });
  const text = await response.text();
  if (response.status !== 200)
    throw new Error(`POST ${url}/api/query answered ${response.status}: ${text.slice(0, 300)}`);
}

/**
 * `POST /api/query` on pgtoll (guard, planner estimate, reservation, execution, charge) against a bare
 * fastify + node-postgres route running the same statement and a route that meters it by hand on the same ledger
 * database (a balance check, then a conditional UPDATE and one ledger INSERT committed per request), each in its
 * own process with the same pool size, driven by autocannon from this process; and the same pgtoll through a
 * provider priced at 0, which tells the gateway's own cost from its metering's. Repetitions alternate between the
 * sides.
 */
export async function runRestQuery(options: RestOptions): Promise<RestResult> {
  // The sides' own profiles, beside pgtoll's (their file names carry their pids, which the log gives).
  const profiled = options.cpuProfileDir ? ["--cpu-prof", `--cpu-prof-dir=${options.cpuProfileDir}`] : [];
  const spawnServer = (script: string, name: string) =>
    spawnNodeUntilReady([...profiled, "--import", "tsx", script], {
      cwd: options.root,
      env: {
        ...process.env,
        BASELINE_DATABASE_URL: options.dataUrl,
        BASELINE_POOL_SIZE: String(options.poolSize),
        HAND_METERED_LEDGER_URL: options.ledgerUrl,
      },
      logFile: join(options.scratchDir, `${name}.log`),
      readyPrefix: `${name} ready `,
    });
  const baseline = await spawnServer("bench/baseline-server.ts", "baseline");
  const handMetered = await spawnServer("bench/hand-metered-server.ts", "hand-metered").catch(
    async (error) => {
      await stopChild(baseline.child, 5000);
      throw error;
    },
  );
  options.log(`rest sides' pids: baseline ${baseline.child.pid}, hand-metered ${handMetered.child.pid}`);
  const bareSide = (name: "baseline" | "hand-metered", server: typeof baseline) => ({
    name,
    pid: server.child.pid!,
    url: server.line.split(/\s+/)[2]!,
    body: (aid: number) => JSON.stringify({ sql: REST_SQL, params: [aid] }),
  });
  const pgtollSide = (name: "pgtoll" | "pgtoll-free", providerId: string) => ({
    name,
    pid: options.pgtollPid,
    url: options.pgtollHttpUrl,
    body: (aid: number) =>
      JSON.stringify({ agentWallet: options.agentWallet, providerId, sql: REST_SQL, params: [aid] }),
  });
  try {
    const sides = [
      bareSide("baseline", baseline),
      bareSide("hand-metered", handMetered),
      pgtollSide("pgtoll", options.providerId),
      pgtollSide("pgtoll-free", options.freeProviderId),
    ];
    const collected = sides.map(() => ({
      rps: [] as number[],
      latencies: [] as Float64Array[],
      requests: 0,
      failures: 0,
      cpu: [] as CpuSpent[],
      ledgerCommits: 0,
      batches: 0,
      batchSeconds: 0,
      error: undefined as string | undefined,
    }));
    for (const [i, side] of sides.entries()) {
      try {
        await probe(side.url, side.body(1));
        await measure(side.url, side.body, options.accounts, options.connections, options.warmupS);
      } catch (error) {
        collected[i]!.error = (error as Error).message;
        options.log(`rest ${side.name}: FAILED ${collected[i]!.error}`);
      }
    }
    for (let run = 1; run <= options.runs; run++) {
      for (const [i, side] of sides.entries()) {
        const into = collected[i]!;
        if (into.error) continue;
        const commitsBefore = await options.ledgerCommits();
        const batchesBefore = await restChargeBatches(side.url);
        const before = options.sampleCpu(side.pid);
        const result = await measure(
          side.url,
          side.body,
          options.accounts,
          options.connections,
          options.durationS,
        );
        into.cpu.push(cpuSpent(before, options.sampleCpu(side.pid)));
        await new Promise((resolve) => setTimeout(resolve, STATS_DELAY_MS));
        into.ledgerCommits += (await options.ledgerCommits()) - commitsBefore;
        const batchesAfter = await restChargeBatches(side.url);
        into.batches += batchesAfter.count - batchesBefore.count;
        into.batchSeconds += batchesAfter.seconds - batchesBefore.seconds;
        into.rps.push(result.rps);
        into.latencies.push(result.latenciesUs);
        into.requests += result.requests;
        into.failures += result.failures;
        options.log(
          `rest ${side.name.padEnd(8)} run ${run}/${options.runs}: ${result.rps.toFixed(0)} req/s${result.failures ? ` (${result.failures} failed)` : ""}`,
        );
      }
    }
    return {
      sql: REST_SQL,
      connections: options.connections,
      poolSize: options.poolSize,
      sides: sides.map((side, i) => {
        const c = collected[i]!;
        return {
          name: side.name,
          url: side.url,
          rps: spread(c.rps),
          latency: summariseLatency(c.latencies),
          requests: c.requests,
          failures: c.failures,
          cpuUsPerRequest: perRequest(c.cpu, c.requests),
          ledgerCommitsPerRequest: c.requests > 0 ? c.ledgerCommits / c.requests : Number.NaN,
          chargeBatches: {
            count: c.batches,
            meanMs: c.batches > 0 ? (c.batchSeconds * 1000) / c.batches : Number.NaN,
          },
          ...(c.error ? { error: c.error } : {}),
        };
      }),
    };
  } finally {
    await Promise.all([stopChild(baseline.child, 5000), stopChild(handMetered.child, 5000)]);
  }
}

function perRequest(spent: CpuSpent[], requests: number): RestSide["cpuUsPerRequest"] {
  const us = (pick: (c: CpuSpent) => number) =>
    requests > 0 ? (spent.reduce((sum, c) => sum + pick(c), 0) * 1e6) / requests : Number.NaN;
  return {
    server: us((c) => c.pgtoll),
    serverSystem: us((c) => c.proxySystem),
    postgres: us((c) => c.postgres),
    autocannon: us((c) => c.runner),
    kernel: us((c) => c.kernel),
    other: us((c) => c.other),
  };
}
