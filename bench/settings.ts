/** The suites `npm run bench` knows, in the order they run. */
export const SUITES = ["select", "range", "write", "rest", "ledger", "guard", "catalog", "memory"] as const;
export type Suite = (typeof SUITES)[number];

/** What one benchmark run does; every field comes from a `PGTOLL_BENCH_*` environment variable. */
export interface BenchSettings {
  quick: boolean;
  /** Measured repetitions of every configuration (min/median/max are over these). */
  runs: number;
  /** Seconds of each measured repetition. */
  durationS: number;
  /** Seconds of the unmeasured warm-up before a suite's first repetition. */
  warmupS: number;
  scale: number;
  clients: number[];
  /** pgbench client counts of the range-read suite (1000- and 100-row results). */
  rangeClients: number[];
  /** pgbench `-j` ceiling: threads are min(clients, this). */
  pgbenchThreads: number;
  writeClients: number;
  restConnections: number;
  /** node-postgres pool size of both the REST gateway (PGTOLL_PROVIDER_POOL_SIZE) and the baseline. */
  restPoolSize: number;
  ledgerSessions: number[];
  idleSessions: number;
  /** Listed providers (of 50 tables each) the catalog suite fills pgtoll's database with. */
  catalogProviders: number;
  suites: Suite[];
  /** Admin URL of an existing PostgreSQL to use instead of an embedded one. */
  databaseUrl: string | undefined;
  cpuProfile: boolean;
  /**
   * The provider's basePricePer1000Rows (markup 1.2). 0 makes it free: the proxy and the REST gateway then write
   * no ledger entry, which measures what metering costs.
   */
  basePricePer1000Rows: number;
  /**
   * Start pgtoll with `--perf-prof --interpreted-frames-native-stack`: V8 writes a `jit-<pid>.dump` in the
   * repository root, which `perf inject --jit` turns into symbols for a `perf record -k 1` of the pgtoll pid.
   */
  perfMap: boolean;
  /** LOG_LEVEL of the pgtoll process (its default is info). */
  logLevel: string;
  /** Keep the scratch directory (cluster, logs) instead of deleting it. */
  keepScratch: boolean;
  /** Run the bare Node.js relay as a fourth select-only target (on unless PGTOLL_BENCH_NODE_RELAY=off). */
  nodeRelay: boolean;
}

function positiveInt(env: NodeJS.ProcessEnv, name: string, fallback: number): number {
  const raw = env[name];
  if (raw === undefined || raw === "") return fallback;
  if (!/^\d+$/.test(raw) || Number(raw) < 1)
    throw new Error(`${name} must be a positive whole number, got "${raw}"`);
  return Number(raw);
}

function intList(env: NodeJS.ProcessEnv, name: string, fallback: number[]): number[] {
  const raw = env[name];
  if (raw === undefined || raw === "") return fallback;
  const values = raw.split(",").map((part) => part.trim());
  if (values.some((value) => !/^\d+$/.test(value) || Number(value) < 1)) {
    throw new Error(`${name} must be a comma-separated list of positive whole numbers, got "${raw}"`);
  }
  return values.map(Number);
}

function suiteList(raw: string | undefined): Suite[] {
  if (raw === undefined || raw === "") return [...SUITES];
  const names = raw.split(",").map((part) => part.trim());
  const unknown = names.filter((name) => !(SUITES as readonly string[]).includes(name));
  if (unknown.length > 0)
    throw new Error(`PGTOLL_BENCH_ONLY: unknown suite ${unknown.join(", ")} (known: ${SUITES.join(", ")})`);
  return SUITES.filter((suite) => names.includes(suite));
}

function price(env: NodeJS.ProcessEnv, name: string, fallback: number): number {
  const raw = env[name];
  if (raw === undefined || raw === "") return fallback;
  if (!/^\d+(\.\d{1,6})?$/.test(raw))
    throw new Error(`${name} must be a price in USDC (0 or more, at most 6 decimals), got "${raw}"`);
  return Number(raw);
}

function flag(raw: string | undefined): boolean {
  return raw !== undefined && ["1", "true", "on", "yes"].includes(raw.toLowerCase());
}

/**
 * Reads the settings. `PGTOLL_BENCH_QUICK=1` is a smoke run (one 1-second repetition each, 250 idle sessions
 * scaled to 1 000); the default is three 5-second repetitions and 1 000 idle sessions. Every individual
 * variable overrides the preset.
 */
export function loadSettings(env: NodeJS.ProcessEnv = process.env): BenchSettings {
  const quick = flag(env.PGTOLL_BENCH_QUICK);
  return {
    quick,
    runs: positiveInt(env, "PGTOLL_BENCH_RUNS", quick ? 1 : 3),
    durationS: positiveInt(env, "PGTOLL_BENCH_DURATION", quick ? 1 : 5),
    warmupS: positiveInt(env, "PGTOLL_BENCH_WARMUP", quick ? 1 : 3),
    scale: positiveInt(env, "PGTOLL_BENCH_SCALE", 10),
    clients: intList(env, "PGTOLL_BENCH_CLIENTS", [1, 10, 50]),
    rangeClients: intList(env, "PGTOLL_BENCH_RANGE_CLIENTS", [10, 50]),
    pgbenchThreads: positiveInt(env, "PGTOLL_BENCH_PGBENCH_THREADS", 2),
    writeClients: positiveInt(env, "PGTOLL_BENCH_WRITE_CLIENTS", 10),
    restConnections: positiveInt(env, "PGTOLL_BENCH_REST_CONNECTIONS", 10),
    restPoolSize: positiveInt(env, "PGTOLL_BENCH_REST_POOL_SIZE", 5),
    ledgerSessions: intList(env, "PGTOLL_BENCH_LEDGER_SESSIONS", [1, 10, 50]),
    idleSessions: positiveInt(env, "PGTOLL_BENCH_IDLE_SESSIONS", quick ? 250 : 1000),
    catalogProviders: positiveInt(env, "PGTOLL_BENCH_CATALOG_PROVIDERS", quick ? 200 : 1000),
    suites: suiteList(env.PGTOLL_BENCH_ONLY),
    databaseUrl: env.PGTOLL_BENCH_DATABASE_URL || undefined,
    cpuProfile: flag(env.PGTOLL_BENCH_CPU_PROF),
    basePricePer1000Rows: price(env, "PGTOLL_BENCH_PRICE", 0.1),
    perfMap: flag(env.PGTOLL_BENCH_PERF),
    logLevel: env.PGTOLL_BENCH_LOG_LEVEL || "info",
    keepScratch: flag(env.PGTOLL_BENCH_KEEP),
    nodeRelay: !["0", "false", "off", "no"].includes((env.PGTOLL_BENCH_NODE_RELAY ?? "").toLowerCase()),
  };
}
