import { mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import type { PgEndpoint } from "./bench-cluster.js";
import { libpqEnv, runCommand } from "./command.js";

export type Protocol = "simple" | "prepared";
export type BuiltinScript = "select-only" | "tpcb-like";
/** Result-set reads: one range of 1000 or 100 consecutive accounts per transaction, what agents mostly run. */
export type RangeScript = "range-1000" | "range-100";
export type PgbenchScript = BuiltinScript | RangeScript;

/** The text of a range-read script for `pgbench -f`. */
export function rangeScriptText(script: RangeScript): string {
  const span = script === "range-1000" ? 999 : 99;
  return [
    `\\set a random(1, 100000 * :scale - ${span})`,
    `SELECT aid, abalance FROM pgbench_accounts WHERE aid BETWEEN :a AND :a + ${span};`,
    "",
  ].join("\n");
}

export interface PgbenchOptions {
  script: PgbenchScript;
  protocol: Protocol;
  clients: number;
  /** pgbench `-j`: at most this many threads (and never more than clients). */
  maxThreads: number;
  durationS: number;
  /** A scratch directory for the per-transaction logs (read, then deleted). */
  scratchDir: string;
}

export interface PgbenchRun {
  /** pgbench's "tps = ... (without initial connection time)". */
  tps: number;
  transactions: number;
  /** Per-transaction latencies in microseconds, from the `-l` log (unsorted). */
  latenciesUs: Float64Array;
}

/** pgbench stopped with an error: `detail` quotes the first failing statement's message (e.g. a guard denial). */
export class PgbenchError extends Error {
  override name = "PgbenchError";
  constructor(
    message: string,
    readonly detail: string,
  ) {
    super(message);
  }
}

function number(stdout: string, pattern: RegExp): number {
  const match = pattern.exec(stdout);
  return match ? Number(match[1]) : Number.NaN;
}

/** The `time` column (3rd, microseconds) of every line of pgbench's per-transaction logs in `dir`. */
async function readLatencies(dir: string): Promise<Float64Array> {
  const values: number[] = [];
  for (const file of await readdir(dir)) {
    const text = await readFile(join(dir, file), "utf8");
    let start = 0;
    while (start < text.length) {
      let end = text.indexOf("\n", start);
      if (end < 0) end = text.length;
      // client_id transaction_no time script_no time_epoch time_us ...
      const first = text.indexOf(" ", start);
      const second = text.indexOf(" ", first + 1);
      const third = text.indexOf(" ", second + 1);
      if (first > 0 && third > second) {
        const us = Number(text.slice(second + 1, third));
        if (Number.isFinite(us)) values.push(us);
      }
      start = end + 1;
    }
  }
  return Float64Array.from(values);
}

/**
 * Runs one pgbench measurement with a built-in script (`-b`) or a range read (`-f`), no vacuum (`-n`: pgtoll's guard denies VACUUM and
 * TRUNCATE, so every target is run the same way), for `durationS` seconds, with per-transaction logging (`-l`).
 */
export async function runPgbench(
  pgbench: string,
  target: PgEndpoint,
  options: PgbenchOptions,
): Promise<PgbenchRun> {
  const logDir = await mkdtemp(join(options.scratchDir, "pgbench-"));
  const threads = Math.max(1, Math.min(options.clients, options.maxThreads));
  const script = options.script;
  let scriptArgs = ["-b", script];
  if (script === "range-1000" || script === "range-100") {
    // Beside the log directory, whose every file is read as a transaction log.
    const file = join(options.scratchDir, `${script}.sql`);
    await writeFile(file, rangeScriptText(script));
    scriptArgs = ["-f", file];
  }
  const args = [
    "-n",
    ...scriptArgs,
    "-M",
    options.protocol,
    "-c",
    String(options.clients),
    "-j",
    String(threads),
    "-T",
    String(options.durationS),
    "-l",
    `--log-prefix=${join(logDir, "tx")}`,
    "-h",
    target.host,
    "-p",
    String(target.port),
    "-U",
    target.user,
    target.database,
  ];
  try {
    const result = await runCommand(pgbench, args, { env: libpqEnv(target.password) });
    const tps = number(result.stdout, /^tps = ([\d.]+)/m);
    if (result.code !== 0 || !Number.isFinite(tps)) {
      const errors = result.stderr.split("\n").filter((line) => /ERROR|FATAL|aborted|error/.test(line));
      const detail = (errors.length > 0 ? errors : result.stderr.trim().split("\n")).slice(0, 4).join("\n");
      throw new PgbenchError(
        `pgbench ${options.script} -M ${options.protocol} -c ${options.clients} failed (exit ${result.code})`,
        detail,
      );
    }
    return {
      tps,
      transactions: number(result.stdout, /^number of transactions actually processed: (\d+)/m),
      latenciesUs: await readLatencies(logDir),
    };
  } finally {
    await rm(logDir, { recursive: true, force: true });
  }
}
