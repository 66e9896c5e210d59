import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { mkdir, readdir } from "node:fs/promises";
import { join } from "node:path";
import { spawnNodeUntilReady, stopChild } from "./ready-child.js";

/** `pgtoll start` running as its own process, so its CPU profile and RSS are its own. */
export interface PgtollProcess {
  pid: number;
  httpUrl: string;
  proxyHost: string;
  proxyPort: number;
  /** Resident set size now and its peak so far, in KiB, from /proc/<pid>/status. */
  memory(): { rssKiB: number; peakKiB: number };
  /**
   * Only with `gcProbe`: full garbage collection in the process, then its RSS and V8 heap in use (KiB).
   */
  collectGarbage(): Promise<{ rssKiB: number; heapUsedKiB: number; externalKiB: number }>;
  stop(): Promise<void>;
}

export interface PgtollProcessOptions {
  /** The repository root (where src/cli.ts is). */
  root: string;
  /** Its own data directory (pgtoll locks it); its log is `pgtoll.log` there. */
  dataDir: string;
  databaseUrl: string;
  /** Shared by every pgtoll process of the run: they read each other's sealed connection strings. */
  secretKeyHex: string;
  env?: Record<string, string>;
  logLevel: string;
  /**
   * When set, the process runs with `--cpu-prof` and writes its profiles into this directory when it stops: one
   * per thread (tsx's module loader has its own), named by Node `CPU.<date>.<time>.<pid>.<thread>.<seq>`.
   */
  cpuProfileDir?: string;
  /** Run with V8's jitdump for `perf` (see BenchSettings.perfMap). */
  perfMap?: boolean;
  /** Preload bench/gc-probe.ts (with --expose-gc) so that `collectGarbage()` works. */
  gcProbe?: boolean;
}

export function newSecretKeyHex(): string {
  return randomBytes(32).toString("hex");
}

function readStatusKiB(pid: number, field: string): number {
  const line = readFileSync(`/proc/${pid}/status`, "utf8")
    .split("\n")
    .find((l) => l.startsWith(`${field}:`));
  return line ? Number(line.split(/\s+/)[1]) : Number.NaN;
}

/** Environment variables that would point the child at something other than the benchmark's services. */
const DROPPED_ENV = ["DATABASE_URL", "REDIS_URL", "NODE_OPTIONS"];

/**
 * Starts `node --import tsx src/cli.ts start` (the entry point of `pgtoll start`) against `databaseUrl`, with
 * rate limits off and both listeners on free loopback ports, and waits for its "pgtoll ready" line.
 */
export async function startPgtoll(options: PgtollProcessOptions): Promise<PgtollProcess> {
  await mkdir(options.dataDir, { recursive: true });
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const name of DROPPED_ENV) delete env[name];
  Object.assign(env, {
    DATABASE_URL: options.databaseUrl,
    PGTOLL_DATA_DIR: options.dataDir,
    PGTOLL_SECRET_KEY: options.secretKeyHex,
    PGTOLL_HOST: "127.0.0.1",
    PGTOLL_HTTP_PORT: "0",
    PGTOLL_PROXY_PORT: "0",
    PGTOLL_RATE_LIMIT: "off",
    // The benchmark's provider database is on its own cluster: the local one (loopback) or the one it was given.
    PGTOLL_PROVIDER_HOSTS: "any",
    LOG_LEVEL: options.logLevel,
    ...options.env,
  });
  const profile = options.cpuProfileDir ? ["--cpu-prof", `--cpu-prof-dir=${options.cpuProfileDir}`] : [];
  if (options.perfMap) profile.push("--perf-prof", "--interpreted-frames-native-stack");
  const probe = options.gcProbe ? ["--expose-gc", "--import", "./bench/gc-probe.ts"] : [];
  const { child, line } = await spawnNodeUntilReady(
    [...profile, "--import", "tsx", ...probe, "src/cli.ts", "start"],
    {
      cwd: options.root,
      env,
      logFile: join(options.dataDir, "pgtoll.log"),
      readyPrefix: "pgtoll ready ",
    },
  );
  const probeWaiters: ((line: string) => void)[] = [];
  let pending = "";
  child.stdout!.on("data", (chunk: string) => {
    pending += chunk;
    const lines = pending.split("\n");
    pending = lines.pop() ?? "";
    for (const l of lines) if (l.startsWith("gc-probe ")) probeWaiters.shift()?.(l);
  });
  const [, , httpUrl = "", proxyUrl = ""] = line.split(/\s+/);
  const proxy = new URL(proxyUrl);
  const pid = child.pid!;
  return {
    pid,
    httpUrl,
    proxyHost: proxy.hostname,
    proxyPort: Number(proxy.port),
    memory: () => ({ rssKiB: readStatusKiB(pid, "VmRSS"), peakKiB: readStatusKiB(pid, "VmHWM") }),
    collectGarbage() {
      if (!options.gcProbe) return Promise.reject(new Error("pgtoll was started without gcProbe"));
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error("pgtoll did not answer the gc probe")), 30_000);
        probeWaiters.push((l) => {
          clearTimeout(timer);
          const [rss = 0, heapUsed = 0, external = 0] = l.split(" ").slice(1).map(Number);
          resolve({ rssKiB: rss / 1024, heapUsedKiB: heapUsed / 1024, externalKiB: external / 1024 });
        });
        child.kill("SIGUSR2");
      });
    },
    // SIGTERM runs pgtoll's own shutdown (charges flushed, process.exit), which is also when --cpu-prof writes.
    stop: () => stopChild(child),
  };
}

/** The main thread's profile among those `--cpu-prof` wrote for `pid` (thread id 0), or null. */
export async function mainThreadProfile(dir: string, pid: number): Promise<string | null> {
  const files = await readdir(dir).catch(() => [] as string[]);
  const main = files.find((file) => file.includes(`.${pid}.0.`) && file.endsWith(".cpuprofile"));
  return main ? join(dir, main) : null;
}
