import { randomUUID } from "node:crypto";
import { beforeAll, describe, expect, it } from "vitest";
import { depositFor, randomWallet, useLedgerDatabase } from "../../test/support/fixtures.js";
import { chargeOutage, watchedLedger } from "../../test/support/watched-ledger.js";
import { ChargeWriter } from "../billing/charge-writer.js";
import { priceOf } from "../billing/cost.js";
import { getBalance, type LedgerEntry, listLedgerEntries, type Queryable } from "../billing/ledger.js";
import { untilNextTick, WindowClock } from "../billing/window-clock.js";
import { loadGuard } from "../guard/index.js";
import { StatementShapes } from "../guard/statement-shape.js";
import { type MeterOptions, SessionMeter } from "./session-meter.js";

const meta = useLedgerDatabase();
beforeAll(() => loadGuard());

/** 1 micro-USDC a row: costs in tests are row counts. */
const ONE_MICRO_A_ROW = priceOf({ priceMicroPer1000Rows: 1000n, markupPpm: 1_000_000n });

/** A meter whose blocking top-ups (the session stops for the ledger) are counted. */
function countedMeter(
  agentWallet: string,
  reserveRows: number,
  { windowIntervalMs = 1000, ...options }: Partial<MeterOptions> & { windowIntervalMs?: number } = {},
  price = ONE_MICRO_A_ROW,
) {
  const writer = new ChargeWriter(meta.pool, { ttlSeconds: 60 });
  const meter = new SessionMeter(meta.pool, writer, agentWallet, meta.providerId, price, {
    reserveRows,
    maxReserveRows: reserveRows,
    reservationTtlSeconds: 60,
    clock: new WindowClock(windowIntervalMs, writer),
    windowMaxCostMicro: 1_000_000n,
    sessionId: randomUUID(),
    shapes: new StatementShapes(),
    ...options,
  });
  const counted = { meter, waits: 0 };
  const topUp = meter.topUp.bind(meter);
  meter.topUp = (minRows?: number) => {
    counted.waits++;
    return topUp(minRows);
  };
  return counted;
}

/** A meter whose ledger statements go through `db`, with a clock that does not tick during a test. */
function meterOver(db: Queryable, agentWallet: string, windowMaxCostMicro: bigint): SessionMeter {
  const writer = new ChargeWriter(db, { ttlSeconds: 60 });
  return new SessionMeter(db, writer, agentWallet, meta.providerId, ONE_MICRO_A_ROW, {
    reserveRows: 1000,
    maxReserveRows: 1000,
    reservationTtlSeconds: 60,
    clock: new WindowClock(10_000, writer),
    windowMaxCostMicro,
    sessionId: randomUUID(),
    shapes: new StatementShapes(),
  });
}

/** What the relay does for one statement of `rows` rows; false when the agent cannot pay for it. */
async function runStatement(meter: SessionMeter, rows: number, sql = "SELECT 1"): Promise<boolean> {
  if (!meter.canStart && !(await meter.topUp(1))) return false;
  for (let i = 0; i < rows; i++) {
    // As the relay: a row the reservation does not pay for waits for one top-up, or the result is cut off.
    if (!meter.allowRow()) {
      if (!(await meter.topUp(1)) || !meter.allowRow()) {
        await meter.endStatement(meter.statementRows, sql, "cutOff");
        return false;
      }
    }
  }
  await meter.endStatement(rows, sql);
  return true;
}

/** Checks that `waiting` is still pending 50 ms on, then that it resolves once `open` lets the ledger answer. */
async function expectHeldUntil(waiting: Promise<void> | undefined, open: () => void): Promise<void> {
  let done = false;
  void waiting?.then(() => (done = true));
  await new Promise((resolve) => setTimeout(resolve, 50));
  expect(done).toBe(false);
  open();
  await waiting;
}

/** The client's think time between statements, during which a top-up ahead can land. */
const pause = () => new Promise((resolve) => setTimeout(resolve, 2));

async function queryEntries(agent: string): Promise<LedgerEntry[]> {
  const entries = await listLedgerEntries(meta.pool, agent, { providerId: meta.providerId, limit: 1000 });
  return entries.filter((entry) => entry.type === "query").reverse();
}

describe("SessionMeter", () => {
  it("reserves the next part ahead, so a busy session does not stop for the ledger every hold", async () => {
    const agent = await depositFor(meta.pool, meta.providerId, 1000n);
    const counted = countedMeter(agent, 20);
    const meter = counted.meter;
    for (let i = 0; i < 200; i++) {
      expect(await runStatement(meter, 1)).toBe(true);
      await pause();
    }
    await meter.release();
    // Without top-ups ahead: one wait per hold of 20 statements, 10 in all.
    expect(counted.waits).toBeLessThanOrEqual(3);
    expect(await getBalance(meta.pool, agent, meta.providerId)).toMatchObject({
      balanceMicro: 800n,
      reservedMicro: 0n,
    });
  });

  it("grows its hold with what the session spends: 1000-row results stop for the ledger a handful of times, not once each", async () => {
    const agent = await depositFor(meta.pool, meta.providerId, 10_000_000n);
    const counted = countedMeter(agent, 1000, { maxReserveRows: 1_000_000 });
    for (let i = 0; i < 100; i++) {
      expect(await runStatement(counted.meter, 1000)).toBe(true);
      await pause();
    }
    await counted.meter.release();
    // A fixed hold of 1000 rows would wait once per statement: 100 times.
    expect(counted.waits).toBeLessThanOrEqual(6);
    expect(await getBalance(meta.pool, agent, meta.providerId)).toMatchObject({
      balanceMicro: 10_000_000n - 100_000n,
      reservedMicro: 0n,
    });
  });

  it("never grows a hold past a quarter of what the agent has available, so its other sessions can still spend", async () => {
    const agent = await depositFor(meta.pool, meta.providerId, 100_000n);
    const busy = countedMeter(agent, 1000, { maxReserveRows: 1_000_000 }).meter;
    for (let i = 0; i < 30; i++) expect(await runStatement(busy, 1000)).toBe(true);
    const { reservedMicro, balanceMicro } = await getBalance(meta.pool, agent, meta.providerId);
    // Holds beyond the first 1000 rows' worth take at most a quarter of the available balance each.
    expect(reservedMicro).toBeLessThan(balanceMicro / 2n);
    const other = countedMeter(agent, 1000).meter;
    expect(await runStatement(other, 1000)).toBe(true);
    await Promise.all([busy.release(), other.release()]);
    expect(await getBalance(meta.pool, agent, meta.providerId)).toMatchObject({
      balanceMicro: 100_000n - 31_000n,
      reservedMicro: 0n,
    });
  });

  it("writes one entry per charge window: the exact sum of its statements, with a breakdown by statement shape", async () => {
    const agent = await depositFor(meta.pool, meta.providerId, 100_000n);
    const { meter } = countedMeter(agent, 1000);
    for (let id = 1; id <= 30; id++)
      expect(await runStatement(meter, 3, `SELECT * FROM items WHERE id = ${id}`)).toBe(true);
    for (let i = 0; i < 5; i++)
      expect(await runStatement(meter, 10, "SELECT name FROM items WHERE id <= $1")).toBe(true);
    expect(await runStatement(meter, 0, "BEGIN")).toBe(true);
    expect(meter.sessionCostMicro).toBe(140n);
    await meter.release();
    const entries = await queryEntries(agent);
    expect(entries).toHaveLength(1);
    const [entry] = entries;
    expect(entry?.amountMicro).toBe(-140n);
    expect(entry?.metadata).toMatchObject({ source: "proxy", window: 1, statements: 36, rowCount: 140 });
    const shapes = entry?.metadata.shapes as { sample: string; calls: number; rows: number; cost: string }[];
    // Thirty texts that differ only in a constant are one shape; the costliest shape comes first.
    expect(shapes.map((shape) => [shape.calls, shape.rows, shape.cost])).toEqual([
      [30, 90, "0.000090"],
      [5, 50, "0.000050"],
      [1, 0, "0.000000"],
    ]);
    expect(shapes[0]?.sample).toBe("SELECT * FROM items WHERE id = 1");
  });

  it("ends a session in one commit: its last window is charged and its hold given back together", async () => {
    const agent = await depositFor(meta.pool, meta.providerId, 100_000n);
    const statements: string[] = [];
    const meter = meterOver(
      watchedLedger(meta.pool, (name) => void statements.push(name)),
      agent,
      1_000_000n,
    );
    for (let i = 0; i < 3; i++) expect(await runStatement(meter, 5)).toBe(true);
    expect(statements).toEqual(["pgtoll_ledger_reserve"]);
    await meter.release();
    expect(statements).toEqual(["pgtoll_ledger_reserve", "pgtoll_ledger_release_charged"]);
    const entries = await queryEntries(agent);
    expect(entries.map((entry) => [entry.amountMicro, entry.metadata.statements])).toEqual([[-15n, 3]]);
    const balance = await getBalance(meta.pool, agent, meta.providerId);
    expect([balance.balanceMicro, balance.reservedMicro]).toEqual([100_000n - 15n, 0n]);
  });

  it("holds a session at the cost bound while its window before is still being written", async () => {
    const agent = await depositFor(meta.pool, meta.providerId, 100_000n);
    let open = () => {};
    const gate = new Promise<void>((resolve) => (open = resolve));
    // The ledger answers charge batches only once the gate opens: the first window stays "being written".
    const meter = meterOver(
      watchedLedger(meta.pool, (name) => (name === "pgtoll_ledger_charge_batch" ? gate : undefined)),
      agent,
      100n,
    );
    expect(await meter.topUp(1)).toBe(true);
    // The first window reaches the bound: written (held at the gate); the session goes on.
    expect(meter.allowRows(100)).toBe(100);
    expect(meter.endStatement(100, "SELECT 1")).toBeUndefined();
    // The second reaches it while the first is unwritten: the session waits.
    expect(meter.allowRows(100)).toBe(100);
    const waiting = meter.endStatement(100, "SELECT 1");
    expect(waiting).toBeInstanceOf(Promise);
    await expectHeldUntil(waiting, open);
    await meter.release();
    expect((await queryEntries(agent)).map((entry) => entry.amountMicro)).toEqual([-100n, -100n]);
  });

  it("keeps what a session spent unwritten under twice the bound when the clock closes its windows and the ledger stalls", async () => {
    const agent = await depositFor(meta.pool, meta.providerId, 100_000n);
    let open = () => {};
    const gate = new Promise<void>((resolve) => (open = resolve));
    const writer = new ChargeWriter(
      watchedLedger(meta.pool, (name) => (name === "pgtoll_ledger_charge_batch" ? gate : undefined)),
      { ttlSeconds: 60 },
    );
    // Ticks every 10 ms close windows of 30 micro-USDC, well below the bound of 100: none reaches it.
    const meter = new SessionMeter(meta.pool, writer, agent, meta.providerId, ONE_MICRO_A_ROW, {
      reserveRows: 1000,
      maxReserveRows: 1000,
      reservationTtlSeconds: 60,
      clock: new WindowClock(10, writer),
      windowMaxCostMicro: 100n,
      sessionId: randomUUID(),
      shapes: new StatementShapes(),
    });
    expect(await meter.topUp(1)).toBe(true);
    let spent = 0;
    let waiting: Promise<void> | undefined;
    for (let i = 0; i < 50 && !waiting; i++) {
      expect(meter.allowRows(30)).toBe(30);
      waiting = meter.endStatement(30, "SELECT 1");
      spent += 30;
      await new Promise((resolve) => setTimeout(resolve, 15));
    }
    // The session stopped once its unwritten windows reached twice the bound, not after fifty of them.
    expect(waiting).toBeInstanceOf(Promise);
    expect(spent).toBeGreaterThanOrEqual(200);
    expect(spent).toBeLessThan(200 + 30);
    await expectHeldUntil(waiting, open);
    await meter.release();
    const charged = (await queryEntries(agent)).reduce((sum, entry) => sum - entry.amountMicro, 0n);
    expect(charged).toBe(BigInt(spent));
  });

  it("does not hold a session at the crash bound for a ledger outage: the wait ends when a write finds the ledger unavailable", async () => {
    const agent = await depositFor(meta.pool, meta.providerId, 100_000n);
    const outage = chargeOutage(meta.pool);
    const meter = meterOver(outage.ledger, agent, 100n);
    expect(await meter.topUp(1)).toBe(true);
    outage.down = true;
    expect(meter.allowRows(100)).toBe(100);
    expect(meter.endStatement(100, "SELECT 1")).toBeUndefined();
    expect(meter.allowRows(100)).toBe(100);
    const waiting = meter.endStatement(100, "SELECT 1");
    expect(waiting).toBeInstanceOf(Promise);
    // The writer's first failed attempt ends the wait; the charges stay queued and are written once it is back.
    await waiting;
    outage.down = false;
    await meter.release();
    expect((await queryEntries(agent)).reduce((sum, entry) => sum - entry.amountMicro, 0n)).toBe(200n);
  });

  it("writes what the session spent so far on request, one entry per call, and resolves only once it is written", async () => {
    const agent = await depositFor(meta.pool, meta.providerId, 100_000n);
    let open = () => {};
    let gate: Promise<void> | undefined = new Promise<void>((resolve) => (open = resolve));
    const ledger = watchedLedger(meta.pool, (name) =>
      name === "pgtoll_ledger_charge_batch" ? gate : undefined,
    );
    const meter = meterOver(ledger, agent, 1_000_000n);
    expect(meter.writeCharges()).toBeUndefined();
    expect(await runStatement(meter, 7, "SELECT 7")).toBe(true);
    const first = meter.writeCharges();
    let written = false;
    void first?.then(() => (written = true));
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(written).toBe(false);
    open();
    expect(await first).toBe("written");
    gate = undefined;
    expect(await runStatement(meter, 3, "SELECT 3")).toBe(true);
    expect(await runStatement(meter, 2, "SELECT 2")).toBe(true);
    expect(await meter.writeCharges()).toBe("written");
    expect(meter.writeCharges()).toBeUndefined();
    const entries = await queryEntries(agent);
    expect(entries.map((entry) => [entry.amountMicro, entry.metadata.rowCount])).toEqual([
      [-7n, 7],
      [-5n, 5],
    ]);
    await meter.release();
  });

  it("stops waiting for its charges when a write finds the ledger unavailable, and writes them once it is back", async () => {
    const agent = await depositFor(meta.pool, meta.providerId, 100_000n);
    const outage = chargeOutage(meta.pool);
    const meter = meterOver(outage.ledger, agent, 1_000_000n);
    expect(await runStatement(meter, 4)).toBe(true);
    outage.down = true;
    expect(await meter.writeCharges()).toBe("unavailable");
    outage.down = false;
    await meter.release();
    expect((await queryEntries(agent)).reduce((sum, entry) => sum - entry.amountMicro, 0n)).toBe(4n);
  });

  it("closes a window once its cost reaches the bound, and the rest at the clock's next tick", async () => {
    const agent = await depositFor(meta.pool, meta.providerId, 100_000n);
    const { meter } = countedMeter(agent, 1000, { windowMaxCostMicro: 100n, windowIntervalMs: 300 });
    // Start just after a tick, so the open window is written at the next one, 300 ms on.
    await new Promise((resolve) => setTimeout(resolve, untilNextTick(300) + 2));
    for (let i = 0; i < 25; i++) expect(await runStatement(meter, 10)).toBe(true);
    // 250 micro-USDC in windows of at most 100: two closed by the bound, 50 left open.
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect((await queryEntries(agent)).map((entry) => entry.amountMicro)).toEqual([-100n, -100n]);
    await new Promise((resolve) => setTimeout(resolve, 350));
    expect((await queryEntries(agent)).map((entry) => entry.amountMicro)).toEqual([-100n, -100n, -50n]);
    await meter.release();
    expect((await getBalance(meta.pool, agent, meta.providerId)).balanceMicro).toBe(100_000n - 250n);
  });

  it("spends a balance smaller than a hold to the last micro-USDC, closes the window at the cut-off at once, then refuses", async () => {
    const agent = await depositFor(meta.pool, meta.providerId, 25n);
    const { meter } = countedMeter(agent, 20);
    let ran = 0;
    while (await runStatement(meter, 1)) {
      ran++;
      await pause();
    }
    expect(ran).toBe(25);
    expect(await runStatement(meter, 3)).toBe(false);
    await meter.release();
    expect(await getBalance(meta.pool, agent, meta.providerId)).toMatchObject({
      balanceMicro: 0n,
      reservedMicro: 0n,
    });
  });

  it("counts a run of rows at once as far as the reservation pays, never a row more, then tops up as allowRow", async () => {
    const agent = await depositFor(meta.pool, meta.providerId, 1000n);
    const { meter } = countedMeter(agent, 30);
    expect(await meter.topUp(1)).toBe(true);
    // 30 rows are held: a run of 50 is paid for 30 rows, the next run for none until a top-up.
    expect(meter.allowRows(50)).toBe(30);
    expect(meter.statementRows).toBe(30);
    expect(meter.allowRows(5)).toBe(0);
    expect(meter.allowRow()).toBe(false);
    expect(await meter.topUp(1)).toBe(true);
    expect(meter.allowRows(1000)).toBeGreaterThan(0);
    const rows = meter.statementRows;
    await meter.endStatement(rows, "SELECT 1");
    await meter.release();
    expect((await getBalance(meta.pool, agent, meta.providerId)).balanceMicro).toBe(1000n - BigInt(rows));
  });

  it("writes the cut-off statement's window with its delivered rows and the cut-off noted", async () => {
    const agent = await depositFor(meta.pool, meta.providerId, 50n);
    const { meter } = countedMeter(agent, 20);
    expect(await runStatement(meter, 80, "SELECT * FROM big")).toBe(false);
    await new Promise((resolve) => setTimeout(resolve, 50));
    const entries = await queryEntries(agent);
    expect(
      entries.map((entry) => [entry.amountMicro, entry.metadata.cutOff, entry.metadata.rowCount]),
    ).toEqual([[-50n, true, 50]]);
    await meter.release();
  });

  it("gives back a part reserved ahead when the session ends while it is being reserved", async () => {
    const agent = await depositFor(meta.pool, meta.providerId, 1000n);
    const { meter } = countedMeter(agent, 20);
    // 11 one-row statements leave 9 of the first hold: the 11th starts a top-up ahead, and the session ends.
    for (let i = 0; i < 11; i++) expect(await runStatement(meter, 1)).toBe(true);
    await meter.release();
    expect(await getBalance(meta.pool, agent, meta.providerId)).toMatchObject({
      balanceMicro: 989n,
      reservedMicro: 0n,
    });
  });

  it("charges a statement that starts while its idle hold is being given back from a hold of its own", async () => {
    const agent = await depositFor(meta.pool, meta.providerId, 1000n);
    const { meter } = countedMeter(agent, 20);
    for (let i = 0; i < 3; i++) expect(await runStatement(meter, 4)).toBe(true);
    // The idle release and the next statement race, as when a query arrives just as the idle timer fires.
    const released = meter.release();
    expect(await runStatement(meter, 5)).toBe(true);
    await released;
    await meter.release();
    expect(await getBalance(meta.pool, agent, meta.providerId)).toMatchObject({
      balanceMicro: 1000n - 17n,
      reservedMicro: 0n,
    });
    expect((await queryEntries(agent)).reduce((sum, entry) => sum + entry.amountMicro, 0n)).toBe(-17n);
  });

  it("does not give an idle hold back under a statement that starts while its top-up ahead lands", async () => {
    const agent = await depositFor(meta.pool, meta.providerId, 1000n);
    const { meter } = countedMeter(agent, 20);
    // 11 one-row statements leave 9 of the first hold: the 11th starts a top-up ahead, still in flight here.
    for (let i = 0; i < 11; i++) expect(await runStatement(meter, 1)).toBe(true);
    let idle = true;
    // Another session reclaims the idle hold; the client's next statement arrives before the top-up lands.
    const released = meter.releaseIfIdle(() => idle);
    idle = false;
    expect(meter.canStart).toBe(true);
    expect(meter.allowRows(5)).toBe(5);
    // Its rows are read over several turns; its end comes after the release was decided.
    await released;
    await meter.endStatement(5, "SELECT 1");
    await meter.release();
    expect(await getBalance(meta.pool, agent, meta.providerId)).toMatchObject({
      balanceMicro: 1000n - 16n,
      reservedMicro: 0n,
    });
    expect((await queryEntries(agent)).reduce((sum, entry) => sum + entry.amountMicro, 0n)).toBe(-16n);
  });

  it("reports the balance with the session's open window written first", async () => {
    const agent = await depositFor(meta.pool, meta.providerId, 1000n);
    const { meter } = countedMeter(agent, 20);
    for (let i = 0; i < 7; i++) expect(await runStatement(meter, 3)).toBe(true);
    expect(await meter.writtenBalance()).toBe(979n);
    await meter.release();
  });

  it("lets every row of a provider that charges nothing through, from the first statement, without the ledger", async () => {
    const agent = randomWallet(); // no balance at all
    const counted = countedMeter(agent, 20, {}, { picoUsdcPer1000Rows: 0n });
    for (const rows of [3, 0, 500]) expect(await runStatement(counted.meter, rows)).toBe(true);
    await counted.meter.release();
    expect(counted.waits).toBe(0);
    expect(await listLedgerEntries(meta.pool, agent, { providerId: meta.providerId, limit: 10 })).toEqual([]);
  });
});
