import { describe, expect, it } from "vitest";
import { noCpu } from "../../bench/cpu-usage.js";
import type { PgbenchCell } from "../../bench/pgbench-matrix.js";
import type { RestSide } from "../../bench/rest-query.js";
import { percentile, spread, summariseLatency } from "../../bench/stats.js";
import { checkTargets, contextRatios } from "../../bench/targets.js";

function cell(
  target: PgbenchCell["target"],
  clients: number,
  protocol: PgbenchCell["protocol"],
  tps: number[],
  p50Us = 100,
): PgbenchCell {
  return {
    target,
    script: "select-only",
    clients,
    protocol,
    tps: spread(tps),
    latency: { p50Us, p99Us: p50Us * 3, samples: 100 },
    transactions: 100,
    cpuUsPerTransaction: { ...noCpu(), other: 0 },
    machineUtilisation: 0,
    failedRuns: 0,
  };
}

describe("bench statistics", () => {
  it("takes min, median and max over the runs", () => {
    expect(spread([30, 10, 20])).toMatchObject({ min: 10, median: 20, max: 30 });
    expect(spread([4, 1, 3, 2]).median).toBe(2.5);
    expect(Number.isNaN(spread([]).median)).toBe(true);
  });

  it("uses nearest-rank percentiles", () => {
    const sorted = Float64Array.from({ length: 100 }, (_, i) => i + 1);
    expect(percentile(sorted, 50)).toBe(50);
    expect(percentile(sorted, 99)).toBe(99);
    expect(percentile(Float64Array.of(7), 99)).toBe(7);
  });

  it("pools latencies of every run before taking percentiles", () => {
    const summary = summariseLatency([Float64Array.of(300, 100), Float64Array.of(200, 400)]);
    expect(summary).toEqual({ p50Us: 200, p99Us: 400, samples: 4 });
  });
});

describe("bench targets", () => {
  const select = [
    cell("direct", 10, "simple", [1000, 1100, 900]),
    cell("pgtoll", 10, "simple", [600, 500, 400]),
    cell("pgtoll-free", 10, "simple", [520]),
    cell("pgbouncer", 10, "simple", [450]),
    cell("node-relay", 10, "simple", [540]),
    cell("direct", 1, "simple", [100], 80),
    cell("pgtoll", 1, "simple", [90], 300),
  ];
  const range = [
    { ...cell("pgbouncer", 10, "prepared", [2000]), script: "range-1000" as const },
    { ...cell("pgtoll", 10, "prepared", [1700]), script: "range-1000" as const },
    { ...cell("pgbouncer", 10, "prepared", [9000]), script: "range-100" as const },
    { ...cell("pgtoll", 10, "prepared", [9900]), script: "range-100" as const },
  ];
  const inputs = { select, range, rest: null, ledger: [], memory: null };

  it("compares medians and marks each target", () => {
    const targets = checkTargets(inputs);
    const byName = (name: string) => targets.find((t) => t.name === name)!;
    expect(byName("point reads: pgtoll / node relay TPS, 10 clients, simple")).toMatchObject({
      value: 500 / 540,
      met: true,
    });
    expect(byName("point reads: pgtoll / pgtoll at price 0 TPS, 10 clients, simple")).toMatchObject({
      value: 500 / 520,
      met: true,
    });
    expect(
      contextRatios(select).find((r) => r.name === "pgtoll / PgBouncer TPS, 10 clients, simple")?.value,
    ).toBe(500 / 450);
    // The 1000-row cell, not the 100-row one of the same clients and protocol.
    expect(byName("1000-row reads: pgtoll / PgBouncer TPS, 10 clients")).toMatchObject({
      value: 0.85,
      met: false,
    });
    expect(byName("p50 latency added by pgtoll, 1 client, simple")).toMatchObject({ value: 220, met: false });
    expect(byName("100-row reads: pgtoll / pgtoll at price 0 TPS, 10 clients").met).toBeNull();
  });

  it("says n/a for what the run did not measure", () => {
    const targets = checkTargets(inputs);
    expect(
      targets.find((t) => t.name === "point reads: pgtoll / node relay TPS, 10 clients, prepared"),
    ).toMatchObject({
      value: null,
      met: null,
    });
    expect(
      targets.find((t) => t.name.startsWith("1000-row reads") && t.name.includes("50 clients"))?.met,
    ).toBeNull();
    expect(targets.find((t) => t.name.startsWith("proxy RSS"))?.met).toBeNull();
    expect(targets.find((t) => t.name.startsWith("ledger"))?.met).toBeNull();
  });

  it("holds pricing on every dimension to 0.95 of rows only, cell by cell, with both sides' CPU", () => {
    const withCpu = (c: PgbenchCell, pgtoll: number, postgres: number): PgbenchCell => ({
      ...c,
      cpuUsPerTransaction: { ...c.cpuUsPerTransaction, pgtoll, proxySystem: pgtoll / 2, postgres },
    });
    const pricedSelect = [
      ...select,
      withCpu(cell("pgtoll-priced", 10, "simple", [480]), 60, 30),
      cell("pgtoll", 10, "prepared", [800]),
      cell("pgtoll-priced", 10, "prepared", [700]),
    ];
    const pricedRange = [
      ...range,
      { ...cell("pgtoll-priced", 10, "prepared", [1700]), script: "range-1000" as const },
      { ...cell("pgtoll-priced", 10, "prepared", [9000]), script: "range-100" as const },
    ];
    const targets = checkTargets({ ...inputs, select: pricedSelect, range: pricedRange });
    const byName = (name: string) => targets.find((t) => t.name === name)!;
    const simple = byName("point reads: priced on every dimension / rows only TPS, 10 clients, simple");
    expect(simple).toMatchObject({ value: 480 / 500, met: true });
    expect(simple.detail).toBe(
      "CPU us/transaction, priced: pgtoll 60 (sys 30), postgres 30, total 90; rows only: pgtoll 0 (sys 0), postgres 0, total 0",
    );
    expect(
      byName("point reads: priced on every dimension / rows only TPS, 10 clients, prepared"),
    ).toMatchObject({ value: 700 / 800, met: false });
    // Each range script against its own rows-only cell.
    expect(byName("range-1000: priced on every dimension / rows only TPS, 10 clients")).toMatchObject({
      value: 1,
      met: true,
    });
    expect(byName("range-100: priced on every dimension / rows only TPS, 10 clients")).toMatchObject({
      value: 9000 / 9900,
      met: false,
    });
    const unmeasured = byName("range-100: priced on every dimension / rows only TPS, 50 clients");
    expect(unmeasured).toMatchObject({ value: null, met: null });
    expect(unmeasured.detail).toBeUndefined();
  });

  it("holds the ledger to 2 us of PostgreSQL CPU per metered statement with charge windows, at 10 sessions", () => {
    const ledger = [
      { mode: "charge-stream" as const, sessions: 10, cpuUsPerCharge: { postgres: 17, client: 9 } },
      { mode: "charge-windows" as const, sessions: 10, cpuUsPerCharge: { postgres: 0.6, client: 2 } },
    ].map((c) => ({ ...c, chargesPerSecond: spread([5000]), consistent: true }));
    expect(checkTargets({ ...inputs, ledger }).find((t) => t.name.startsWith("ledger"))).toMatchObject({
      value: 0.6,
      met: true,
    });
  });

  it("holds memory to 50 MB per 1 000 idle sessions", () => {
    const memory = {
      requested: 1000,
      opened: 500,
      rssBeforeKiB: 0,
      rssAfterKiB: 0,
      heapBeforeKiB: 0,
      heapAfterKiB: 0,
      rssAfterCloseKiB: 0,
      deltaMB: 30,
      mbPer1000: 60,
      kibPerSession: 0,
    };
    expect(checkTargets({ ...inputs, memory }).find((t) => t.name.startsWith("proxy RSS"))).toMatchObject({
      value: 60,
      met: false,
    });
  });
});

describe("bench context ratios", () => {
  it("compares pgtoll and PgBouncer with the bare Node.js relay per client count and protocol", () => {
    const select = [
      cell("pgbouncer", 10, "simple", [1000]),
      cell("node-relay", 10, "simple", [800]),
      cell("pgtoll", 10, "simple", [400]),
      cell("direct", 10, "simple", [1600]),
      cell("pgtoll", 1, "simple", [100]),
      cell("node-relay", 1, "simple", [200]),
    ];
    const ratios = contextRatios(select);
    expect(ratios.find((r) => r.name === "pgtoll / node relay TPS, 10 clients, simple")?.value).toBe(0.5);
    expect(ratios.find((r) => r.name === "node relay / PgBouncer TPS, 10 clients, simple")?.value).toBe(0.8);
    expect(ratios.find((r) => r.name === "pgtoll / direct TPS, 10 clients, simple")?.value).toBe(0.25);
    expect(ratios.find((r) => r.name === "pgtoll / node relay TPS, 10 clients, prepared")?.value).toBeNull();
    expect(ratios.some((r) => r.name.includes(" 1 clients"))).toBe(false);
  });

  it("tells the gateway's own cost from its metering's: POST /api/query at price 0 against the bare route", () => {
    const side = (name: RestSide["name"], median: number, error?: string): RestSide => ({
      name,
      url: "http://127.0.0.1:1",
      rps: spread([median]),
      latency: { p50Us: 0, p99Us: 0, samples: 0 },
      requests: 1,
      failures: 0,
      cpuUsPerRequest: { server: 0, serverSystem: 0, postgres: 0, autocannon: 0, kernel: 0, other: 0 },
      ledgerCommitsPerRequest: 0,
      chargeBatches: { count: 0, meanMs: Number.NaN },
      ...(error ? { error } : {}),
    });
    const rest = (free: RestSide) => ({
      sql: "SELECT 1",
      connections: 10,
      poolSize: 5,
      sides: [side("baseline", 8000), side("pgtoll", 2000), free],
    });
    const name = "POST /api/query at price 0 (no hold, no charge) / fastify+pg baseline RPS";
    expect(contextRatios([], [], rest(side("pgtoll-free", 4000))).find((r) => r.name === name)?.value).toBe(
      0.5,
    );
    const failed = contextRatios([], [], rest(side("pgtoll-free", 4000, "503")));
    expect(failed.some((r) => r.name === name)).toBe(false);
  });

  it("holds POST /api/query to 2.5 times the route metered by hand", () => {
    const side = (name: RestSide["name"], median: number): RestSide => ({
      name,
      url: "http://127.0.0.1:1",
      rps: spread([median]),
      latency: { p50Us: 0, p99Us: 0, samples: 0 },
      requests: 1,
      failures: 0,
      cpuUsPerRequest: { server: 0, serverSystem: 0, postgres: 0, autocannon: 0, kernel: 0, other: 0 },
      ledgerCommitsPerRequest: 0,
      chargeBatches: { count: 0, meanMs: Number.NaN },
    });
    const target = (pgtoll: number, handMetered: number) =>
      checkTargets({
        select: [],
        range: [],
        ledger: [],
        memory: null,
        rest: {
          sql: "SELECT 1",
          connections: 10,
          poolSize: 5,
          sides: [side("baseline", 3000), side("hand-metered", handMetered), side("pgtoll", pgtoll)],
        },
      }).find((t) => t.name.startsWith("POST /api/query / route metered by hand"));
    expect(target(1000, 400)).toMatchObject({ value: 2.5, met: true });
    expect(target(1000, 500)).toMatchObject({ value: 2, met: false });
  });

  it("leaves the relay's ratios out when the relay did not run", () => {
    const ratios = contextRatios([cell("pgtoll", 10, "simple", [400])]);
    expect(ratios.some((r) => r.name.includes("relay"))).toBe(false);
  });
});
