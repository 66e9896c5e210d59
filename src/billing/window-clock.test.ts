import { randomUUID } from "node:crypto";
import { beforeAll, describe, expect, it } from "vitest";
import { depositFor, useLedgerDatabase } from "../../test/support/fixtures.js";
import { watchedLedger } from "../../test/support/watched-ledger.js";
import { loadGuard } from "../guard/index.js";
import { StatementShapes } from "../guard/statement-shape.js";
import { SessionMeter } from "../proxy/session-meter.js";
import { ChargeWriter } from "./charge-writer.js";
import { priceOf } from "./cost.js";
import { getBalance, listLedgerEntries, type Queryable } from "./ledger.js";
import { untilNextTick, WindowClock } from "./window-clock.js";

const meta = useLedgerDatabase();
const ONE_MICRO_A_ROW = priceOf({ priceMicroPer1000Rows: 1000n, markupPpm: 1_000_000n });
const shapes = new StatementShapes();
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

beforeAll(async () => {
  await loadGuard();
});

/** A charge writer and a clock of `intervalMs` on the metadata pool, counting the charge batches written. */
function countingClock(intervalMs: number) {
  const counter = {
    batches: 0,
    db: watchedLedger(meta.pool, (name) => {
      if (name === "pgtoll_ledger_charge_batch") counter.batches++;
      return undefined;
    }),
  };
  const writer = new ChargeWriter(counter.db, { ttlSeconds: 60 });
  return { counter, writer, clock: new WindowClock(intervalMs, writer) };
}

/** `count` agents with 1 USDC each. */
function fundedAgents(count: number): Promise<string[]> {
  return Promise.all(Array.from({ length: count }, () => depositFor(meta.pool, meta.providerId, 1_000_000n)));
}

/** A meter of `agent` on the given writer and clock. */
function meterOn(
  db: Queryable,
  writer: ChargeWriter,
  clock: WindowClock,
  agent: string,
  windowMaxCostMicro: bigint,
) {
  return new SessionMeter(db, writer, agent, meta.providerId, ONE_MICRO_A_ROW, {
    reserveRows: 1000,
    maxReserveRows: 1000,
    reservationTtlSeconds: 60,
    clock,
    windowMaxCostMicro,
    sessionId: randomUUID(),
    shapes,
  });
}

describe("WindowClock", () => {
  it("counts the next tick from a multiple of the interval, never 0", () => {
    for (const interval of [1, 7, 250, 1000]) {
      const left = untilNextTick(interval);
      expect(left).toBeGreaterThanOrEqual(Math.min(1, interval));
      expect(left).toBeLessThanOrEqual(interval + 1);
    }
  });

  it("writes the open windows of every session in one ledger commit at the tick", async () => {
    const { counter, writer, clock } = countingClock(200);
    const agents = await fundedAgents(8);
    const meters = agents.map((agent) => meterOn(counter.db, writer, clock, agent, 1_000_000n));
    // Just after a tick: every window opens in this interval and waits for the next tick.
    await sleep(untilNextTick(200) + 2);
    for (const [n, meter] of meters.entries()) {
      expect(meter.canStart || (await meter.topUp(1))).toBe(true);
      expect(meter.allowRows(n + 1)).toBe(n + 1);
      expect(meter.endStatement(n + 1, `SELECT * FROM t LIMIT ${n + 1}`)).toBeUndefined();
    }
    expect(counter.batches).toBe(0);
    await sleep(untilNextTick(200) + 50);
    await writer.flush();
    // Eight windows, eight entries, one commit.
    expect(counter.batches).toBe(1);
    for (const [n, agent] of agents.entries()) {
      const entries = await listLedgerEntries(meta.pool, agent, { providerId: meta.providerId, limit: 10 });
      expect(entries.map((entry) => [entry.type, entry.amountMicro])).toEqual([
        ["query", -BigInt(n + 1)],
        ["deposit", 1_000_000n],
      ]);
    }
    await Promise.all(meters.map((meter) => meter.release()));
    expect(counter.batches).toBe(1);
    for (const [n, agent] of agents.entries())
      expect((await getBalance(meta.pool, agent, meta.providerId)).balanceMicro).toBe(
        1_000_000n - BigInt(n + 1),
      );
  });

  it("writes, with a window that reaches the cost bound, the windows at least half way to it, and no others", async () => {
    const { counter, writer, clock } = countingClock(1000);
    const agents = await fundedAgents(3);
    const [full, halfWay, small] = agents.map((agent) => meterOn(counter.db, writer, clock, agent, 100n)) as [
      SessionMeter,
      SessionMeter,
      SessionMeter,
    ];
    await sleep(untilNextTick(1000) + 2);
    const spend = async (meter: SessionMeter, rows: number) => {
      expect(meter.canStart || (await meter.topUp(1))).toBe(true);
      expect(meter.allowRows(rows)).toBe(rows);
      meter.endStatement(rows, "SELECT * FROM t");
    };
    await spend(halfWay, 60);
    await spend(small, 10);
    await spend(full, 100);
    await writer.flush();
    const charged = async () =>
      Promise.all(
        agents.map(
          async (agent) => 1_000_000n - (await getBalance(meta.pool, agent, meta.providerId)).balanceMicro,
        ),
      );
    expect(counter.batches).toBe(1);
    expect(await charged()).toEqual([100n, 60n, 0n]);
    await sleep(untilNextTick(1000) + 50);
    await writer.flush();
    expect(counter.batches).toBe(2);
    expect(await charged()).toEqual([100n, 60n, 10n]);
    await Promise.all([full, halfWay, small].map((meter) => meter.release()));
  });

  it("forgets a window closed before its tick", async () => {
    const { clock } = countingClock(100);
    let calls = 0;
    const close = () => calls++;
    clock.atNextTick(close);
    clock.atNextTick(close);
    clock.cancel(close);
    await sleep(150);
    expect(calls).toBe(0);
    clock.atNextTick(close);
    clock.atNextTick(close);
    await sleep(150);
    expect(calls).toBe(1);
  });
});
