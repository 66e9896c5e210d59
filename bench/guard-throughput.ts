import { readFileSync } from "node:fs";
import { performance } from "node:perf_hooks";
import { checkSql, loadGuard } from "../src/guard/index.js";
import { type Spread, spread } from "./stats.js";

export interface GuardResult {
  cases: number;
  /** checkSql calls per second, cycling through every case of cases.jsonl (allow, deny and invalid alike). */
  casesPerSecond: Spread;
  /** checkSql calls per second on pgbench's select-only statement with a fresh literal each time (a cache miss). */
  pgbenchSelectPerSecond: Spread;
  /** Median microseconds per call of each. */
  casesUsPerCall: number;
  pgbenchSelectUsPerCall: number;
}

function readCases(file: string): string[] {
  return readFileSync(file, "utf8")
    .split("\n")
    .filter((line) => line.trim() !== "")
    .map((line) => (JSON.parse(line) as { sql: string }).sql);
}

/** Calls `next()` through checkSql for `durationS` seconds; returns calls per second. */
function spin(durationS: number, next: (i: number) => string): number {
  const until = performance.now() + durationS * 1000;
  let calls = 0;
  let sink = 0;
  for (;;) {
    // Check the clock once per 64 calls: reading it costs about as much as a small statement.
    for (let k = 0; k < 64; k++) sink += checkSql(next(calls++)).kind.length;
    const now = performance.now();
    if (now >= until) {
      if (sink < 0) throw new Error("unreachable");
      return calls / ((now - until) / 1000 + durationS);
    }
  }
}

/**
 * The guard alone, in this process, without the proxy's verdict cache: statements per second of `checkSql`
 * over the guard contract (src/guard/cases.jsonl), and over pgbench's select-only statement (what the proxy checks per
 * transaction in the simple protocol, where every statement text differs).
 */
export async function runGuardThroughput(
  casesFile: string,
  runs: number,
  durationS: number,
  warmupS: number,
): Promise<GuardResult> {
  await loadGuard();
  const cases = readCases(casesFile);
  const byCase = (i: number) => cases[i % cases.length]!;
  const pgbenchSelect = (i: number) =>
    `SELECT abalance FROM pgbench_accounts WHERE aid = ${(i * 7919) % 1_000_000};`;
  spin(warmupS, byCase);
  spin(warmupS, pgbenchSelect);
  const casesRates: number[] = [];
  const selectRates: number[] = [];
  for (let run = 0; run < runs; run++) {
    casesRates.push(spin(durationS, byCase));
    selectRates.push(spin(durationS, pgbenchSelect));
  }
  const casesPerSecond = spread(casesRates);
  const pgbenchSelectPerSecond = spread(selectRates);
  return {
    cases: cases.length,
    casesPerSecond,
    pgbenchSelectPerSecond,
    casesUsPerCall: 1e6 / casesPerSecond.median,
    pgbenchSelectUsPerCall: 1e6 / pgbenchSelectPerSecond.median,
  };
}
