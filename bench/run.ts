/**
 * `npm run bench`: pgtoll against direct PostgreSQL and PgBouncer, on one machine, in one run, with one
 * PostgreSQL behind all of them. Prints a table, the ratios and the targets, and writes bench/results/<time>.json.
 * Settings: bench/settings.ts; what each number means: bench/README.md.
 */
import { chmod, mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { loadavg, tmpdir } from "node:os";
import { dirname, join, relative, resolve } from "node:path";
import { performance } from "node:perf_hooks";
import { fileURLToPath } from "node:url";
import pg from "pg";
import { createMetadataPool } from "../src/db/pool.js";
import { projectGuardCasesFile } from "../src/guard/guard-cases.js";
import { createAgentToken } from "../src/proxy/agent-token.js";
import { createProviderRole, initialisePgbench, startBenchCluster } from "./bench-cluster.js";
import { runCatalogRead } from "./catalog-read.js";
import { type CpuSources, cpuSnapshot, postmasterPidOf } from "./cpu-usage.js";
import { runGuardThroughput } from "./guard-throughput.js";
import { measureIdleMemory } from "./idle-memory.js";
import { runLedgerThroughput } from "./ledger-throughput.js";
import { describeMachine } from "./machine.js";
import { benchPricing, fundAgent, fundedAgent, registerProvider } from "./metered-agent.js";
import { startNodeRelay } from "./node-relay-process.js";
import { type PgbenchTarget, runPgbenchMatrix } from "./pgbench-matrix.js";
import { startPgbouncer } from "./pgbouncer.js";
import { mainThreadProfile, newSecretKeyHex, type PgtollProcess, startPgtoll } from "./pgtoll-process.js";
import { minimumPlacementProblem, nominalCosts, pricedBenchPricing } from "./priced-provider.js";
import { type BenchResult, formatReport } from "./report.js";
import { runRestQuery } from "./rest-query.js";
import { loadSettings } from "./settings.js";
import { checkTargets, contextRatios } from "./targets.js";
import { findTools } from "./tools.js";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const resultsDir = join(root, "bench", "results");
const began = performance.now();
const log = (line: string) =>
  process.stderr.write(`[bench +${((performance.now() - began) / 1000).toFixed(0)}s] ${line}\n`);

/** Upstream sessions allowed per provider (pgtoll) and per pool (PgBouncer): more than any pgbench run opens. */
const POOL_LIMIT = 100;

/**
 * Where `pgtoll-priced` runs, beside `pgtoll`: the cells of its targets only (point reads at 10 clients, both
 * protocols; 100- and 1000-row reads at 10 and 50), so that it adds little to a run.
 */
const PRICED_SELECT_CLIENTS = [10];
const PRICED_RANGE_CLIENTS = [10, 50];

async function main(): Promise<void> {
  const settings = loadSettings();
  const has = (suite: (typeof settings.suites)[number]) => settings.suites.includes(suite);
  const tools = findTools(has("select"));
  const startedAt = new Date();
  const loadAtStart = loadavg();
  if (loadAtStart[0]! > 1) {
    log(
      `warning: load average ${loadAtStart.map((n) => n.toFixed(2)).join(" ")}: other work is running; the numbers will be noisy`,
    );
  }
  const stamp = startedAt.toISOString().replace(/[:.]/g, "-");
  const scratch = await mkdtemp(join(tmpdir(), "pgtoll-bench-"));
  // The embedded PostgreSQL and PgBouncer run as `postgres` when this runs as root: they must reach into it.
  await chmod(scratch, 0o711);
  await mkdir(resultsDir, { recursive: true });
  const cleanups: (() => Promise<void>)[] = [];
  const cleanup = async () => {
    for (const step of cleanups.splice(0).reverse())
      await step().catch((error: Error) => log(`cleanup: ${error.message}`));
  };
  process.once("SIGINT", () => void cleanup().finally(() => process.exit(130)));
  if (settings.keepScratch) log(`scratch directory (kept): ${scratch}`);
  else cleanups.push(() => rm(scratch, { recursive: true, force: true }));

  try {
    log(
      `settings: ${settings.runs} x ${settings.durationS} s, clients ${settings.clients.join(",")}, suites ${settings.suites.join(",")}`,
    );
    log(settings.databaseUrl ? "using PGTOLL_BENCH_DATABASE_URL" : "starting the embedded PostgreSQL");
    const cluster = await startBenchCluster(scratch, settings.databaseUrl);
    cleanups.push(() => cluster.stop());
    const machine = await describeMachine(cluster.adminUrl, tools, loadAtStart, scratch);
    log(`machine: ${machine.cpuModel}, ${machine.cores} cores; ${machine.postgres.split(",")[0]}`);

    log(`pgbench -i -s ${settings.scale} (direct)`);
    await initialisePgbench(tools.pgbench, cluster.data, settings.scale);

    const secretKeyHex = newSecretKeyHex();
    const cpuProfileDir = settings.cpuProfile ? join(resultsDir, `cpu-${stamp}`) : undefined;
    const pgtoll = await startPgtoll({
      root,
      dataDir: join(scratch, "pgtoll"),
      databaseUrl: cluster.metaUrl,
      secretKeyHex,
      logLevel: settings.logLevel,
      env: {
        PGTOLL_PROXY_UPSTREAM_LIMIT: String(POOL_LIMIT),
        PGTOLL_PROVIDER_POOL_SIZE: String(settings.restPoolSize),
      },
      ...(cpuProfileDir ? { cpuProfileDir } : {}),
      perfMap: settings.perfMap,
    });
    cleanups.push(() => pgtoll.stop());
    log(
      `pgtoll ${pgtoll.httpUrl}, proxy ${pgtoll.proxyHost}:${pgtoll.proxyPort}${cpuProfileDir ? " (--cpu-prof)" : ""}`,
    );
    if (settings.perfMap)
      log(
        `pgtoll pid ${pgtoll.pid} writes jit-${pgtoll.pid}.dump: perf record -k 1 -g -p ${pgtoll.pid} -o <file> -- sleep <s>, then perf inject --jit -i <file> -o <file>.jit (bench/README.md, Profiling)`,
      );

    const ledgerDb = createMetadataPool(cluster.metaUrl, 4);
    cleanups.push(() => ledgerDb.end());
    const pricing = benchPricing(settings.basePricePer1000Rows);
    const providerRoleUrl = await createProviderRole(cluster);
    const provider = await registerProvider(pgtoll.httpUrl, providerRoleUrl, pricing);
    // The same database and agent at price 0: what the proxy costs without metering.
    const freeProvider = await registerProvider(pgtoll.httpUrl, providerRoleUrl, benchPricing(0));
    const agent = await fundedAgent(ledgerDb, provider.providerId);
    const agentEndpoint = async (providerId = provider.providerId) => ({
      host: pgtoll.proxyHost,
      port: pgtoll.proxyPort,
      user: agent.wallet,
      password: await createAgentToken(agent.key, providerId),
      database: providerId,
    });

    const postmasterPid = cluster.dataDir ? postmasterPidOf(cluster.dataDir) : undefined;
    const cpuSources: CpuSources = { pgtollPid: pgtoll.pid, ...(postmasterPid ? { postmasterPid } : {}) };
    const matrixCommon = {
      sampleCpu: () => cpuSnapshot(cpuSources),
      pgbench: tools.pgbench,
      runs: settings.runs,
      durationS: settings.durationS,
      warmupS: settings.warmupS,
      maxThreads: settings.pgbenchThreads,
      scratchDir: scratch,
      log,
    };

    let selectOnly: BenchResult["selectOnly"] = [];
    const rangeReads: BenchResult["rangeReads"] = [];
    let pricedProvider: BenchResult["pricedProvider"] = null;
    if (has("select") || has("range")) {
      // The same database and agent, priced on every dimension, funded as the rows-only provider is.
      const pricedPricing = pricedBenchPricing(settings.basePricePer1000Rows);
      const priced = await registerProvider(pgtoll.httpUrl, providerRoleUrl, pricedPricing);
      await fundAgent(ledgerDb, agent.wallet, priced.providerId);
      pricedProvider = { pricing: pricedPricing, nominalCosts: nominalCosts(settings.basePricePer1000Rows) };
      const placement = minimumPlacementProblem(pricedProvider.nominalCosts);
      if (placement && settings.basePricePer1000Rows > 0) log(`warning: ${placement}`);

      const bouncer = await startPgbouncer(
        tools.pgbouncer!,
        join(scratch, "pgbouncer"),
        cluster.data,
        POOL_LIMIT,
      );
      cleanups.push(() => bouncer.stop());
      cpuSources.pgbouncerPid = bouncer.pid;
      const targets: PgbenchTarget[] = [
        { name: "direct", endpoint: cluster.data },
        { name: "pgbouncer", endpoint: bouncer.endpoint },
      ];
      const relay = settings.nodeRelay ? await startNodeRelay(root, scratch, cluster.data) : undefined;
      if (relay) {
        cleanups.push(() => relay.stop());
        cpuSources.nodeRelayPid = relay.pid;
        targets.push({ name: "node-relay", endpoint: relay.endpoint });
      }
      targets.push({ name: "pgtoll", endpoint: await agentEndpoint() });
      // Next to pgtoll in every repetition, so that drift lands on both sides of its ratio alike.
      const pricedEndpoint = await agentEndpoint(priced.providerId);
      const freeEndpoint = await agentEndpoint(freeProvider.providerId);
      const withPriced = (clients: number[]): PgbenchTarget[] => [
        ...targets,
        { name: "pgtoll-priced", endpoint: pricedEndpoint, clients },
        { name: "pgtoll-free", endpoint: freeEndpoint },
      ];
      if (has("select"))
        selectOnly = await runPgbenchMatrix({
          ...matrixCommon,
          script: "select-only",
          targets: withPriced(PRICED_SELECT_CLIENTS),
          clients: settings.clients,
          protocols: ["simple", "prepared"],
        });
      if (has("range"))
        for (const script of ["range-1000", "range-100"] as const)
          rangeReads.push(
            ...(await runPgbenchMatrix({
              ...matrixCommon,
              script,
              targets: withPriced(PRICED_RANGE_CLIENTS),
              clients: settings.rangeClients,
              protocols: ["prepared"],
            })),
          );
      await bouncer.stop();
      await relay?.stop();
    }

    let writeMix: BenchResult["writeMix"] = [];
    if (has("write")) {
      const targets: PgbenchTarget[] = [
        { name: "direct", endpoint: cluster.data },
        { name: "pgtoll", endpoint: await agentEndpoint() },
      ];
      writeMix = await runPgbenchMatrix({
        ...matrixCommon,
        script: "tpcb-like",
        targets,
        clients: [settings.writeClients],
        protocols: ["simple", "prepared"],
      });
    }

    const rest = has("rest")
      ? await runRestQuery({
          root,
          scratchDir: scratch,
          pgtollHttpUrl: pgtoll.httpUrl,
          pgtollPid: pgtoll.pid,
          sampleCpu: (serverPid) => cpuSnapshot({ ...cpuSources, pgtollPid: serverPid }),
          dataUrl: cluster.dataUrl,
          ledgerUrl: cluster.metaUrl,
          agentWallet: agent.wallet,
          ...(cpuProfileDir ? { cpuProfileDir } : {}),
          providerId: provider.providerId,
          freeProviderId: freeProvider.providerId,
          ledgerCommits: async () =>
            Number(
              (
                await ledgerDb.query<{ commits: string }>(
                  "SELECT xact_commit AS commits FROM pg_stat_database WHERE datname = current_database()",
                )
              ).rows[0]!.commits,
            ),
          accounts: settings.scale * 100_000,
          connections: settings.restConnections,
          poolSize: settings.restPoolSize,
          runs: settings.runs,
          durationS: settings.durationS,
          warmupS: settings.warmupS,
          log,
        })
      : null;

    const ledger = has("ledger")
      ? await runLedgerThroughput({
          metaUrl: cluster.metaUrl,
          providerId: provider.providerId,
          sessions: settings.ledgerSessions,
          sampleCpu: () => cpuSnapshot({ ...(postmasterPid ? { postmasterPid } : {}) }),
          runs: settings.runs,
          durationS: Math.min(settings.durationS, 2),
          windowsDurationS: settings.durationS,
          log,
        })
      : [];

    const guard = has("guard")
      ? await runGuardThroughput(projectGuardCasesFile, settings.runs, Math.min(settings.durationS, 2), 1)
      : null;
    if (guard) log(`guard: ${guard.casesPerSecond.median.toFixed(0)} statements/s over cases.jsonl`);

    const catalog = has("catalog")
      ? await runCatalogRead({
          httpUrl: pgtoll.httpUrl,
          db: ledgerDb,
          providers: settings.catalogProviders,
          tables: 50,
          requests: 200,
          log,
        })
      : null;

    // Peak RSS of the process that served every suite above: per-session state that grows with statements shows here.
    const pgtollMemory = pgtoll.memory();
    // The profile covers the suites above (not the idle-session one); Node writes it when the process exits.
    await pgtoll.stop();
    const cpuProfile = cpuProfileDir ? await mainThreadProfile(cpuProfileDir, pgtoll.pid) : null;
    if (cpuProfile)
      log(`CPU profile: ${relative(root, cpuProfile)} (summary: npx tsx bench/profile-summary.ts <file>)`);

    let memory: BenchResult["memory"] = null;
    if (has("memory")) {
      const sessions = await idleSessionBudget(cluster.adminUrl, settings.idleSessions);
      const idle: PgtollProcess = await startPgtoll({
        root,
        dataDir: join(scratch, "pgtoll-idle"),
        databaseUrl: cluster.metaUrl,
        secretKeyHex,
        logLevel: settings.logLevel,
        env: { PGTOLL_PROXY_UPSTREAM_LIMIT: String(sessions + 50) },
        gcProbe: true,
      });
      cleanups.push(() => idle.stop());
      memory = await measureIdleMemory(idle, agent, sessions, log);
      memory.requested = settings.idleSessions;
      await idle.stop();
    }

    const result: BenchResult = {
      startedAt: startedAt.toISOString(),
      finishedAt: new Date().toISOString(),
      settings: { ...settings, databaseUrl: settings.databaseUrl ? "(set)" : undefined },
      machine,
      pgtoll: {
        ...pgtollEnvOverrides(),
        pricing,
        logLevel: settings.logLevel,
        proxyUpstreamLimit: POOL_LIMIT,
        restPoolSize: settings.restPoolSize,
        metadataOnSameCluster: true,
        rssAtEndMiB: Math.round(pgtollMemory.rssKiB / 1024),
        peakRssMiB: Math.round(pgtollMemory.peakKiB / 1024),
      },
      pricedProvider,
      selectOnly,
      rangeReads,
      writeMix,
      rest,
      guard,
      catalog,
      ledger,
      memory,
      targets: checkTargets({ select: selectOnly, range: rangeReads, rest, ledger, memory, catalog }),
      context: contextRatios(selectOnly, rangeReads, rest),
      cpuProfile: cpuProfile ? relative(root, cpuProfile) : null,
    };
    const file = join(resultsDir, `${stamp}.json`);
    await writeFile(file, `${JSON.stringify(result, null, 2)}\n`);
    process.stdout.write(`\n${formatReport(result)}\n\nresult: ${relative(root, file)}\n`);
  } finally {
    await cleanup();
  }
}

/** pgtoll settings inherited from this environment (PGTOLL_*, not PGTOLL_BENCH_*): they change what is measured. */
function pgtollEnvOverrides(): Record<string, string> {
  return Object.fromEntries(
    Object.entries(process.env).filter(
      (entry): entry is [string, string] =>
        entry[0].startsWith("PGTOLL_") &&
        !entry[0].startsWith("PGTOLL_BENCH_") &&
        entry[0] !== "PGTOLL_SECRET_KEY",
    ),
  );
}

/**
 * Each idle proxy session holds an upstream session: ask for no more than PostgreSQL can still accept,
 * keeping 50 connections in reserve for everything else.
 */
async function idleSessionBudget(adminUrl: string, wanted: number): Promise<number> {
  const client = new pg.Client({ connectionString: adminUrl });
  await client.connect();
  try {
    const { rows } = await client.query<{ max: number; used: number }>(
      "SELECT current_setting('max_connections')::int AS max, (SELECT count(*)::int FROM pg_stat_activity) AS used",
    );
    const room = rows[0]!.max - rows[0]!.used - 50;
    if (room < wanted)
      log(
        `memory: PostgreSQL has room for ${room} more sessions, not ${wanted}; measuring ${room} and scaling to 1 000`,
      );
    return Math.max(1, Math.min(wanted, room));
  } finally {
    await client.end();
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`\nbench failed: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
