import type { CatalogResult } from "./catalog-read.js";
import type { GuardResult } from "./guard-throughput.js";
import type { IdleMemoryResult } from "./idle-memory.js";
import type { LedgerCell } from "./ledger-throughput.js";
import type { MachineInfo } from "./machine.js";
import type { PgbenchCell, TargetName } from "./pgbench-matrix.js";
import type { NominalCost, PricedBenchPricing } from "./priced-provider.js";
import type { RestResult, RestSide } from "./rest-query.js";
import type { BenchSettings } from "./settings.js";
import type { Spread } from "./stats.js";
import type { ContextRatio, TargetCheck } from "./targets.js";

/** Everything one `npm run bench` measured; written as JSON to bench/results/. */
export interface BenchResult {
  startedAt: string;
  finishedAt: string;
  settings: BenchSettings;
  machine: MachineInfo;
  /** How pgtoll was set up for the run (pricing, pool sizes, log level). */
  pgtoll: Record<string, unknown>;
  /**
   * The `pgtoll-priced` target's provider: its pricing request and what a statement of each priced cell nominally
   * costs there and at the rows-only provider; null when neither the select nor the range suite ran.
   */
  pricedProvider: { pricing: PricedBenchPricing; nominalCosts: NominalCost[] } | null;
  selectOnly: PgbenchCell[];
  /** 1000- and 100-row range reads, prepared. */
  rangeReads: PgbenchCell[];
  writeMix: PgbenchCell[];
  rest: RestResult | null;
  guard: GuardResult | null;
  /** The public catalog's answer times over HTTP with many listed providers. */
  catalog?: CatalogResult | null;
  ledger: LedgerCell[];
  memory: IdleMemoryResult | null;
  targets: TargetCheck[];
  /** Ratios that explain the targets (pgtoll and PgBouncer against the bare Node.js relay); no bounds. */
  context: ContextRatio[];
  cpuProfile: string | null;
}

const int = (n: number) => (Number.isFinite(n) ? Math.round(n).toString() : "-");
const fixed = (n: number, digits: number) => (Number.isFinite(n) ? n.toFixed(digits) : "-");
const cpuText = (u: Record<string, number>) =>
  Object.entries(u)
    .map(([k, v]) => `${k} ${int(v)}`)
    .join(", ");
/** "server 206 (sys 40), postgres 143, ...": the server's system time in brackets, as in the pgbench table. */
const restCpuText = ({ server, serverSystem, ...rest }: RestSide["cpuUsPerRequest"]) =>
  `server ${int(server)} (sys ${int(serverSystem)}), ${cpuText(rest)}`;
const spreadText = (s: Spread) =>
  s.values.length === 0 ? "-" : `${int(s.median)} [${int(s.min)}-${int(s.max)}]`;

function pgbenchTable(title: string, cells: PgbenchCell[]): string[] {
  if (cells.length === 0) return [];
  const targets = [...new Set(cells.map((c) => c.target))] as TargetName[];
  const rows = [...new Set(cells.map((c) => `${c.clients}/${c.protocol}`))];
  const width = 36;
  const lines = [
    title,
    `${"clients protocol".padEnd(17)}| ${targets.map((t) => t.padEnd(width)).join("| ")}`,
  ];
  lines.push(
    `${"".padEnd(17)}| ${targets.map(() => "TPS median [min-max]  p50/p99 us".padEnd(width)).join("| ")}`,
  );
  for (const row of rows) {
    const [clients, protocol] = row.split("/");
    const texts = targets.map((target) => {
      const c = cells.find((x) => x.target === target && `${x.clients}/${x.protocol}` === row);
      if (!c) return "";
      if (c.tps.values.length === 0) return "FAILED (see below)";
      const failed = c.failedRuns > 0 ? ` (${c.failedRuns} failed)` : "";
      return `${spreadText(c.tps)}  ${int(c.latency.p50Us)}/${int(c.latency.p99Us)}${failed}`;
    });
    lines.push(
      `${clients!.padStart(7)} ${protocol!.padEnd(9)}| ${texts.map((t) => t.padEnd(width)).join("| ")}`,
    );
  }
  lines.push(
    "CPU us per transaction: proxy (pgtoll, PgBouncer or node relay; in brackets its system time: socket syscalls) / postgres / pgbench / kernel threads+irq / other processes; machine busy %",
  );
  for (const row of rows) {
    const [clients, protocol] = row.split("/");
    const texts = targets.map((target) => {
      const c = cells.find((x) => x.target === target && `${x.clients}/${x.protocol}` === row);
      if (!c || c.tps.values.length === 0) return "";
      const u = c.cpuUsPerTransaction;
      const proxy = {
        direct: 0,
        pgbouncer: u.pgbouncer,
        "node-relay": u.nodeRelay,
        pgtoll: u.pgtoll,
        "pgtoll-priced": u.pgtoll,
        "pgtoll-free": u.pgtoll,
      }[target];
      const system = target === "direct" ? "" : ` (${int(u.proxySystem)})`;
      return `${int(proxy)}${system} / ${int(u.postgres)} / ${int(u.pgbench)} / ${int(u.kernel)} / ${int(u.other)}  ${int(c.machineUtilisation * 100)}%`;
    });
    lines.push(
      `${clients!.padStart(7)} ${protocol!.padEnd(9)}| ${texts.map((t) => t.padEnd(width)).join("| ")}`,
    );
  }
  for (const c of cells.filter((x) => x.error)) {
    lines.push(
      `  ${c.target} c=${c.clients} ${c.protocol}, ${c.failedRuns} run(s) failed; first: ${c.error}`,
    );
  }
  return [...lines, ""];
}

/** The priced provider's request and, per statement, rows only -> priced (USDC, nominal usage). */
function pricedProviderLines(priced: BenchResult["pricedProvider"]): string[] {
  if (!priced) return [];
  const costs = priced.nominalCosts.map(
    (c) =>
      `${c.statement} ${c.rowsOnlyUsdc} -> ${c.pricedUsdc}${c.minimumApplied ? " (minimum)" : ""} (${c.usage.rows} row${c.usage.rows === 1 ? "" : "s"}, ${c.usage.bytes} B, ${c.usage.ms} ms)`,
  );
  return [
    `pgtoll-priced: the same agent through a provider priced on every dimension: ${JSON.stringify(priced.pricing)}`,
    `  nominal USDC per statement, rows only -> priced: ${costs.join("; ")}`,
  ];
}

/** The human-readable report: machine, every measurement, then the targets with met / NOT MET. */
export function formatReport(result: BenchResult): string {
  const { machine, settings } = result;
  const out: string[] = [
    "pgtoll benchmark",
    `machine: ${machine.cpuModel}, ${machine.cores} cores, ${machine.memoryGiB} GiB, Linux ${machine.kernel}`,
    `software: Node ${machine.node}; ${machine.postgres.split(",")[0]}; ${machine.pgbench}; ${machine.pgbouncer ?? "no PgBouncer"}`,
    `postgres settings: ${Object.entries(machine.postgresSettings)
      .map(([k, v]) => `${k}=${v}`)
      .join(", ")}; disk 8 kB write+fdatasync ${machine.fdatasyncUs ?? "?"} us`,
    `load average before the run: ${machine.loadAverageAtStart.join(" ")}${machine.loadAverageAtStart[0]! > 1 ? "  (other work was running: numbers are noisy)" : ""}`,
    `runs: ${settings.runs} x ${settings.durationS} s per configuration (warm-up ${settings.warmupS} s)${settings.quick ? " [quick]" : ""}; pgbench -j <= ${settings.pgbenchThreads}`,
    `pgtoll: ${Object.entries(result.pgtoll)
      .map(([k, v]) => `${k}=${typeof v === "object" ? JSON.stringify(v) : v}`)
      .join(", ")}`,
    ...pricedProviderLines(result.pricedProvider),
    "",
  ];
  out.push(
    ...pgbenchTable(
      `pgbench select-only (-S, scale ${settings.scale}); latency from pgbench's per-transaction log (-l), pooled over the runs`,
      result.selectOnly,
    ),
  );
  for (const script of ["range-1000", "range-100"] as const) {
    out.push(
      ...pgbenchTable(
        `pgbench ${script}: SELECT aid, abalance FROM pgbench_accounts WHERE aid BETWEEN :a AND :a + ${script === "range-1000" ? 999 : 99} (prepared)`,
        result.rangeReads.filter((c) => c.script === script),
      ),
    );
  }
  out.push(
    ...pgbenchTable(
      "pgbench tpcb-like (metered write mix: BEGIN, 3 UPDATE ... WHERE, SELECT, INSERT, END)",
      result.writeMix,
    ),
  );
  if (result.rest) {
    out.push(
      `POST /api/query (autocannon, ${result.rest.connections} connections, pool ${result.rest.poolSize}): ${result.rest.sql}`,
      `${"side".padEnd(12)}| ${"req/s median [min-max]".padEnd(26)}| ${"p50/p99 us".padEnd(14)}| CPU us per request`,
    );
    for (const side of result.rest.sides) {
      if (side.error) out.push(`${side.name.padEnd(12)}| FAILED: ${side.error}`);
      else
        out.push(
          `${side.name.padEnd(12)}| ${spreadText(side.rps).padEnd(26)}| ${`${int(side.latency.p50Us)}/${int(side.latency.p99Us)}`.padEnd(14)}| ${restCpuText(side.cpuUsPerRequest)}; ledger commits ${fixed(side.ledgerCommitsPerRequest, 2)}${side.chargeBatches.count > 0 ? `, charge batches ${fixed(side.requests / side.chargeBatches.count, 1)} requests each, ${fixed(side.chargeBatches.meanMs, 2)} ms to write` : ""}${side.failures ? `  (${side.failures} failed requests)` : ""}`,
        );
    }
    out.push("");
  }
  if (result.guard) {
    const g = result.guard;
    out.push(
      "guard alone (checkSql, no verdict cache)",
      `  cases.jsonl (${g.cases} cases): ${spreadText(g.casesPerSecond)} statements/s (${fixed(g.casesUsPerCall, 1)} us each)`,
      `  pgbench select, new literal each: ${spreadText(g.pgbenchSelectPerSecond)} statements/s (${fixed(g.pgbenchSelectUsPerCall, 1)} us each)`,
      "",
    );
  }
  if (result.catalog) {
    const c = result.catalog;
    out.push(
      `catalog (GET /api/providers, one request at a time, ${c.providers} listed providers of ${c.tablesPerProvider} tables): ms p50/p99`,
      ...c.cells.map(
        (cell) =>
          `  ${cell.request.padEnd(28)} ${fixed(cell.p50Ms, 2)}/${fixed(cell.p99Ms, 2)} (${cell.answered} in the answer, ${cell.requests} requests)`,
      ),
      "",
    );
  }
  if (result.ledger.length > 0) {
    out.push(
      "ledger alone (one agent, N concurrent sessions each awaiting one durable charge at a time; charge-stream: 5 000 charges/s queued without waiting; charge-windows: 5 000 one-row statements/s metered by the proxy's own SessionMeter, one entry per session window): charges (statements) per second",
    );
    for (const c of result.ledger) {
      out.push(
        `  ${c.mode.padEnd(19)} sessions=${String(c.sessions).padEnd(4)} ${spreadText(c.chargesPerSecond).padEnd(20)} CPU us/charge: postgres ${int(c.cpuUsPerCharge.postgres)}, client ${int(c.cpuUsPerCharge.client)}${c.consistent ? "" : "  LEDGER INCONSISTENT"}`,
      );
    }
    out.push("");
  }
  if (result.memory) {
    const m = result.memory;
    out.push(
      `idle agent sessions through the proxy (own pgtoll process): ${m.opened}/${m.requested} open`,
      `  RSS ${fixed(m.rssBeforeKiB / 1024, 1)} MiB -> ${fixed(m.rssAfterKiB / 1024, 1)} MiB (+${fixed(m.deltaMB, 1)} MB, ${fixed(m.kibPerSession, 1)} KiB/session${m.opened !== 1000 ? `, ${fixed(m.mbPer1000, 1)} MB per 1 000` : ""}); after closing: ${fixed(m.rssAfterCloseKiB / 1024, 1)} MiB`,
      `  V8 heap + external after a full GC: ${fixed(m.heapBeforeKiB / 1024, 1)} MiB -> ${fixed(m.heapAfterKiB / 1024, 1)} MiB`,
      ...(m.error ? [`  ${m.error}`] : []),
      "",
    );
  }
  out.push("targets, from this run's medians");
  if (result.settings.basePricePer1000Rows === 0)
    out.push(
      "  (the provider was free, PGTOLL_BENCH_PRICE=0: nothing was metered, so these are not the targets' runs)",
    );
  // Names vary in length: one column for all, as wide as the longest.
  const nameWidth = Math.max(
    50,
    ...result.targets.map((t) => t.name.length),
    ...result.context.map((r) => r.name.length),
  );
  for (const t of result.targets) {
    const status = t.met === null ? "n/a" : t.met ? "met" : "NOT MET";
    const value = t.value === null ? "-" : t.unit ? `${fixed(t.value, 1)} ${t.unit}` : fixed(t.value, 2);
    out.push(`  ${t.name.padEnd(nameWidth)} ${value.padStart(10)}   target ${t.target.padEnd(10)} ${status}`);
    if (t.detail) out.push(`    ${t.detail}`);
  }
  if (result.context.length > 0) {
    out.push(
      "",
      "context (not targets): pgtoll against direct PostgreSQL, the bare Node.js relay (what Node's socket path alone costs a proxy), 100-row reads, POST /api/query at price 0",
    );
    for (const r of result.context) {
      out.push(`  ${r.name.padEnd(nameWidth)} ${(r.value === null ? "-" : fixed(r.value, 2)).padStart(10)}`);
    }
  }
  if (result.cpuProfile) out.push("", `CPU profile of the pgtoll process: ${result.cpuProfile}`);
  return out.join("\n");
}
