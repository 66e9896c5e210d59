import { describe, expect, it } from "vitest";
import { noCpu } from "../../bench/cpu-usage.js";
import type { MachineInfo } from "../../bench/machine.js";
import type { PgbenchCell } from "../../bench/pgbench-matrix.js";
import { nominalCosts, pricedBenchPricing } from "../../bench/priced-provider.js";
import { type BenchResult, formatReport } from "../../bench/report.js";
import type { RestSide } from "../../bench/rest-query.js";
import { loadSettings } from "../../bench/settings.js";
import { spread } from "../../bench/stats.js";
import { checkTargets } from "../../bench/targets.js";

const machine: MachineInfo = {
  cpuModel: "test CPU",
  cores: 2,
  memoryGiB: 1,
  kernel: "6",
  node: "v20",
  postgres: "PostgreSQL 18",
  postgresSettings: {},
  pgbench: "pgbench 15",
  pgbouncer: "PgBouncer 1.18",
  fdatasyncUs: 100,
  loadAverageAtStart: [0, 0, 0],
};

function cell(target: PgbenchCell["target"], proxyUs: number, systemUs: number): PgbenchCell {
  const proxy = target === "pgtoll" || target === "pgbouncer" ? { [target]: proxyUs } : {};
  return {
    target,
    script: "select-only",
    clients: 10,
    protocol: "prepared",
    tps: spread([1000]),
    latency: { p50Us: 100, p99Us: 300, samples: 10 },
    transactions: 1000,
    cpuUsPerTransaction: { ...noCpu(), other: 0, postgres: 40, ...proxy, proxySystem: systemUs },
    machineUtilisation: 0.9,
    failedRuns: 0,
  };
}

function side(name: RestSide["name"], server: number, serverSystem: number): RestSide {
  return {
    name,
    url: "http://127.0.0.1:1",
    rps: spread([100]),
    latency: { p50Us: 1000, p99Us: 2000, samples: 500 },
    requests: 500,
    failures: 0,
    cpuUsPerRequest: { server, serverSystem, postgres: 50, autocannon: 30, kernel: 10, other: 0 },
    ledgerCommitsPerRequest: name === "pgtoll" ? 0.2 : 0,
    chargeBatches: { count: 0, meanMs: Number.NaN },
  };
}

function report(env: NodeJS.ProcessEnv): string {
  const select = [
    cell("direct", 0, 0),
    cell("pgbouncer", 20, 18),
    cell("pgtoll", 53, 25),
    {
      ...cell("pgtoll-priced", 0, 0),
      cpuUsPerTransaction: { ...cell("pgtoll", 61, 27).cpuUsPerTransaction },
    },
  ];
  const rest = { sql: "SELECT 1", connections: 10, poolSize: 5, sides: [side("pgtoll", 205, 44)] };
  const result: BenchResult = {
    startedAt: "",
    finishedAt: "",
    settings: loadSettings(env),
    machine,
    pgtoll: {},
    pricedProvider: {
      pricing: pricedBenchPricing(0.1),
      nominalCosts: nominalCosts(0.1),
    },
    selectOnly: select,
    rangeReads: [],
    writeMix: [],
    rest,
    guard: null,
    ledger: [],
    memory: null,
    targets: checkTargets({ select, range: [], rest, ledger: [], memory: null }),
    context: [],
    cpuProfile: null,
  };
  return formatReport(result);
}

describe("bench report", () => {
  it("shows each proxy's and the REST server's system time in brackets, none for direct PostgreSQL", () => {
    const text = report({});
    expect(text).toMatch(/\| 0 \/ 40 \//);
    expect(text).toContain("20 (18) / 40");
    expect(text).toContain("53 (25) / 40");
    expect(text).toContain("server 205 (sys 44), postgres 50");
  });

  it("shows the priced provider's CPU as pgtoll's, and both sides' CPU under its targets", () => {
    const text = report({});
    expect(text).toContain("61 (27) / 40");
    expect(text).toMatch(
      /point reads: priced on every dimension \/ rows only TPS, 10 clients, prepared +1\.00 +target >= 0\.95 +met\n +CPU us\/transaction, priced: pgtoll 61 \(sys 27\), postgres 40, total 101; rows only: pgtoll 53 \(sys 25\)/,
    );
  });

  it("prints the priced provider's prices and what a statement costs there, the minimum on point reads", () => {
    const text = report({});
    expect(text).toContain('"minimumCostPerStatement":0.0003');
    expect(text).toContain('"tablePrices":{"pgbench_accounts":0.11}');
    expect(text).toContain("point read 0.000120 -> 0.000300 (minimum)");
    expect(text).toMatch(/100-row read 0\.012000 -> 0\.0\d+ \(100 rows/);
  });

  it("warns that the targets were not measured on a metered proxy when the provider was free", () => {
    expect(report({ PGTOLL_BENCH_PRICE: "0" })).toContain("nothing was metered");
    expect(report({})).not.toContain("nothing was metered");
  });
});
