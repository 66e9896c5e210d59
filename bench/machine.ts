import { readFileSync } from "node:fs";
import { type FileHandle, open, rm } from "node:fs/promises";
import { cpus, release, totalmem } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import pg from "pg";
import { spread } from "./stats.js";
import { toolVersion } from "./tools.js";

/** What the numbers were measured on: they mean little without it. */
export interface MachineInfo {
  cpuModel: string;
  cores: number;
  memoryGiB: number;
  kernel: string;
  node: string;
  postgres: string;
  /** Server settings that move the numbers (fsync and synchronous_commit decide what a durable write costs). */
  postgresSettings: Record<string, string>;
  pgbench: string;
  pgbouncer: string | null;
  /** Median wall time of an 8 kB write + fdatasync next to the cluster: the floor of a durable commit. */
  fdatasyncUs: number | null;
  /** 1, 5 and 15-minute load averages before the benchmark started: above ~0.5 something else was running. */
  loadAverageAtStart: number[];
}

function cpuModel(): string {
  try {
    const line = readFileSync("/proc/cpuinfo", "utf8")
      .split("\n")
      .find((l) => l.startsWith("model name"));
    if (line) return line.split(":")[1]!.trim();
  } catch {
    // not Linux: fall back to what Node reports
  }
  return cpus()[0]?.model ?? "unknown";
}

const SETTINGS = ["max_connections", "shared_buffers", "fsync", "synchronous_commit", "wal_level"];

/** Times 100 x (8 kB write + fdatasync) of a file in `dir`; null if the file system refuses. */
async function measureFdatasync(dir: string): Promise<number | null> {
  const file = join(dir, "fdatasync-probe");
  let handle: FileHandle | undefined;
  try {
    handle = await open(file, "w");
    const block = Buffer.alloc(8192, 1);
    const times: number[] = [];
    for (let i = 0; i < 100; i++) {
      const started = performance.now();
      await handle.write(block, 0, block.length, 0);
      await handle.datasync();
      times.push((performance.now() - started) * 1000);
    }
    return Math.round(spread(times).median);
  } catch {
    return null;
  } finally {
    await handle?.close();
    await rm(file, { force: true });
  }
}

export async function describeMachine(
  adminUrl: string,
  tools: { pgbench: string; pgbouncer: string | null },
  loadAverageAtStart: number[],
  /** A directory on the cluster's file system. */
  scratchDir: string,
): Promise<MachineInfo> {
  const client = new pg.Client({ connectionString: adminUrl });
  await client.connect();
  let postgres: string;
  const postgresSettings: Record<string, string> = {};
  try {
    postgres = (await client.query<{ version: string }>("SELECT version()")).rows[0]!.version;
    const { rows } = await client.query<{ name: string; setting: string; unit: string | null }>(
      "SELECT name, setting, unit FROM pg_settings WHERE name = ANY($1)",
      [SETTINGS],
    );
    for (const row of rows)
      postgresSettings[row.name] = row.unit ? `${row.setting} (${row.unit})` : row.setting;
  } finally {
    await client.end();
  }
  return {
    cpuModel: cpuModel(),
    cores: cpus().length,
    memoryGiB: Math.round((totalmem() / 2 ** 30) * 10) / 10,
    kernel: release(),
    node: process.version,
    postgres,
    postgresSettings,
    pgbench: toolVersion(tools.pgbench),
    pgbouncer: tools.pgbouncer ? toolVersion(tools.pgbouncer) : null,
    fdatasyncUs: await measureFdatasync(scratchDir),
    loadAverageAtStart: loadAverageAtStart.map((n) => Math.round(n * 100) / 100),
  };
}
