import { performance } from "node:perf_hooks";
import { describe, expect, it } from "vitest";
import { depositFor, useLedgerDatabase } from "../../test/support/fixtures.js";
import { ChargeWriter } from "./charge-writer.js";
import { getBalance, listLedgerEntries, type Reservation, reserveFunds } from "./ledger.js";

const meta = useLedgerDatabase();

async function heldReservation(amountMicro = 1000n): Promise<Reservation> {
  const agentWallet = await depositFor(meta.pool, meta.providerId, 1_000_000n);
  const reservation = await reserveFunds(meta.pool, {
    agentWallet,
    providerId: meta.providerId,
    minMicro: amountMicro,
    maxMicro: amountMicro,
    ttlSeconds: 60,
  });
  if (!reservation) throw new Error("no reservation");
  return reservation;
}

/** The metadata pool, counting the charge batches sent through it. */
function countingBatches() {
  const counter = {
    batches: 0,
    db: {
      query: (...args: Parameters<typeof meta.pool.query>) => {
        counter.batches++;
        return meta.pool.query(...args);
      },
    } as never,
  };
  return counter;
}

const charge = (r: Reservation, n: number) => ({
  reservationId: r.id,
  agentWallet: r.agentWallet,
  providerId: r.providerId,
  costMicro: 1n,
  metadata: { sql: `SELECT ${n}`, rowCount: 1 },
});

describe("ChargeWriter batch interval", () => {
  it("never makes a lone session that awaits each charge wait out the interval", async () => {
    const r = await heldReservation();
    const writer = new ChargeWriter(meta.pool, { ttlSeconds: 60, batchIntervalMs: 2000 });
    const started = performance.now();
    for (let n = 0; n < 5; n++) await writer.enqueue(charge(r, n));
    expect(performance.now() - started).toBeLessThan(2000);
    expect((await getBalance(meta.pool, r.agentWallet, meta.providerId)).balanceMicro).toBe(1_000_000n - 5n);
  });

  it("while charges keep coming, gathers an interval's worth into one batch, in order", async () => {
    const r = await heldReservation(100_000n);
    const counter = countingBatches();
    const writer = new ChargeWriter(counter.db, {
      ttlSeconds: 60,
      batchIntervalMs: 400,
      gatherTickMs: 50,
      fullBatch: 1000,
    });
    // The proxy's pattern under load: charges keep coming (bursts of 5 every 2 ms for a second), unawaited.
    const writes: Promise<void>[] = [];
    const started = performance.now();
    while (performance.now() - started < 1000) {
      for (let n = 0; n < 5; n++) writes.push(writer.enqueue(charge(r, writes.length)));
      await new Promise((resolve) => setTimeout(resolve, 2));
    }
    await Promise.all(writes);
    // Without the interval, each batch would take what arrived during the previous round trip: hundreds.
    expect(counter.batches).toBeLessThanOrEqual(10);
    const entries = (
      await listLedgerEntries(meta.pool, r.agentWallet, { providerId: meta.providerId, limit: 5000 })
    ).reverse();
    expect(entries.slice(1).map((e) => e.metadata.sql)).toEqual(writes.map((_, n) => `SELECT ${n}`));
  });

  it("lets sessions that await each charge go on as soon as they have all queued theirs", async () => {
    const reservations = await Promise.all(Array.from({ length: 5 }, () => heldReservation()));
    const writer = new ChargeWriter(meta.pool, { ttlSeconds: 60, batchIntervalMs: 3000, gatherTickMs: 20 });
    const started = performance.now();
    await Promise.all(
      reservations.map(async (r) => {
        for (let n = 0; n < 4; n++) await writer.enqueue(charge(r, n));
      }),
    );
    // Each round waits at most about one tick for charges that never come, never the 3 s interval.
    expect(performance.now() - started).toBeLessThan(3000);
    for (const r of reservations)
      expect((await getBalance(meta.pool, r.agentWallet, meta.providerId)).balanceMicro).toBe(
        1_000_000n - 4n,
      );
  });

  it("writes a full batch without waiting out the interval, and flush cuts the wait short", async () => {
    const r = await heldReservation();
    const writer = new ChargeWriter(meta.pool, { ttlSeconds: 60, batchIntervalMs: 5000, fullBatch: 4 });
    const started = performance.now();
    const full = [0, 1, 2, 3, 4].map((n) => writer.enqueue(charge(r, n)));
    await Promise.all(full);
    const rest = [5, 6].map((n) => writer.enqueue(charge(r, n)));
    await writer.flush();
    await Promise.all(rest);
    expect(performance.now() - started).toBeLessThan(5000);
    expect((await getBalance(meta.pool, r.agentWallet, meta.providerId)).balanceMicro).toBe(1_000_000n - 7n);
  });
});
