/**
 * How long the provider analytics take on a ledger of a million entries: `npx tsx bench/analytics-ledger.ts`.
 * Starts its own embedded PostgreSQL in a temporary directory, writes the ledger by SQL
 * (test/support/synthetic-ledger.ts), and times each analytics query (median and worst of 5) for one provider's
 * last 7 and 30 days, on a ledger shared by 20 providers and on one that a single provider fills alone.
 */
import { chmod, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import pg from "pg";
import { earningsSeries } from "../src/analytics/earnings-series.js";
import { providerSummary } from "../src/analytics/provider-summary.js";
import { topAgents } from "../src/analytics/top-agents.js";
import { topStatements } from "../src/analytics/top-statements.js";
import { startEmbeddedCluster } from "../src/db/embedded.js";
import { migrate } from "../src/db/migrate.js";
import { createMetadataPool } from "../src/db/pool.js";
import { fillSyntheticLedger } from "../test/support/synthetic-ledger.js";

const ENTRIES = Number(process.env.PGTOLL_BENCH_LEDGER_ENTRIES ?? 1_000_000);
const RUNS = 5;

async function timed(run: () => Promise<unknown>): Promise<{ median: number; worst: number }> {
  const times: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    const started = performance.now();
    await run();
    times.push(performance.now() - started);
  }
  times.sort((a, b) => a - b);
  return { median: times[Math.floor(RUNS / 2)]!, worst: times[RUNS - 1]! };
}

async function measure(adminUrl: string, database: string, providers: number): Promise<void> {
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${database}`);
  await admin.end();
  const url = new URL(adminUrl);
  url.pathname = `/${database}`;
  const db = createMetadataPool(url.toString(), 4);
  try {
    await migrate(db);
    let started = performance.now();
    const { providerIds } = await fillSyntheticLedger(db, {
      providers,
      agentsPerProvider: 500,
      entries: ENTRIES,
      days: 90,
    });
    const fillMs = performance.now() - started;
    // The index as migration 14 builds it on a ledger that already holds the entries.
    await db.query("DROP INDEX ledger_entries_provider_time_idx");
    started = performance.now();
    await db.query(
      "CREATE INDEX ledger_entries_provider_time_idx ON ledger_entries (provider_id, created_at) WHERE type = 'query'",
    );
    const indexMs = performance.now() - started;
    await db.query("ANALYZE ledger_entries");
    const id = providerIds[0]!;
    console.log(
      `\n${ENTRIES} entries over ${providers} provider(s), 90 days: written in ${(fillMs / 1000).toFixed(1)} s, index built in ${(indexMs / 1000).toFixed(1)} s`,
    );
    for (const days of [7, 30]) {
      const to = new Date();
      const range = { from: new Date(to.getTime() - days * 86_400_000), to };
      const { rows } = await db.query<{ n: string }>(
        "SELECT count(*)::text AS n FROM ledger_entries WHERE provider_id = $1 AND created_at >= $2",
        [id, range.from],
      );
      const results = {
        summary: await timed(() => providerSummary(db, id, range)),
        earnings: await timed(() => earningsSeries(db, id, range, "day")),
        agents: await timed(() => topAgents(db, id, range, 20, null)),
        statements: await timed(() => topStatements(db, id, range, 10)),
      };
      const cells = Object.entries(results)
        .map(([name, t]) => `${name} ${t.median.toFixed(0)} ms (worst ${t.worst.toFixed(0)})`)
        .join(", ");
      console.log(`  last ${days} days (${rows[0]!.n} of the provider's entries): ${cells}`);
    }
  } finally {
    await db.end();
  }
}

const dir = await mkdtemp(join(tmpdir(), "pgtoll-analytics-bench-"));
// As root the cluster runs as `postgres`, which must reach its directory inside this one.
await chmod(dir, 0o711);
const cluster = await startEmbeddedCluster(join(dir, "cluster"));
try {
  await measure(cluster.adminUrl, "shared_ledger", 20);
  await measure(cluster.adminUrl, "one_provider_ledger", 1);
} finally {
  await cluster.stop();
  await rm(dir, { recursive: true, force: true });
}
