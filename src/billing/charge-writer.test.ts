import { describe, expect, it } from "vitest";
import { depositFor, randomWallet, useLedgerDatabase } from "../../test/support/fixtures.js";
import { ChargeWriter } from "./charge-writer.js";
import { extendReservation, getBalance, listLedgerEntries, reserveFunds, voidReservation } from "./ledger.js";

const meta = useLedgerDatabase();

async function expectChained(agentWallet: string) {
  const entries = (
    await listLedgerEntries(meta.pool, agentWallet, { providerId: meta.providerId, limit: 100_000 })
  ).reverse();
  let running = 0n;
  for (const entry of entries) {
    expect(entry.balanceBeforeMicro).toBe(running);
    running = entry.balanceAfterMicro;
  }
  expect((await getBalance(meta.pool, agentWallet, meta.providerId)).balanceMicro).toBe(running);
  return entries;
}

/** A new agent with `depositMicro` deposited, and a reservation of exactly `heldMicro` of it. */
async function heldAgent(depositMicro: bigint, heldMicro: bigint) {
  const agent = randomWallet();
  await depositFor(meta.pool, meta.providerId, depositMicro, agent);
  const reservation = (await reserveFunds(meta.pool, {
    agentWallet: agent,
    providerId: meta.providerId,
    minMicro: heldMicro,
    maxMicro: heldMicro,
    ttlSeconds: 60,
  }))!;
  /** Queues a charge of `costMicro` against the reservation on `writer`. */
  const charge = (writer: ChargeWriter, costMicro: bigint) =>
    writer.enqueue({
      reservationId: reservation.id,
      agentWallet: agent,
      providerId: meta.providerId,
      costMicro,
      metadata: {},
    });
  return { agent, r: reservation, charge };
}

describe("extendReservation", () => {
  it("adds what is available between min and max, and nothing below min", async () => {
    const { r } = await heldAgent(100n, 10n);
    expect(await extendReservation(meta.pool, r, 1n, 50n)).toBe(50n);
    expect(r.amountMicro).toBe(60n);
    expect(await extendReservation(meta.pool, r, 1n, 500n)).toBe(40n);
    expect(await extendReservation(meta.pool, r, 1n, 1n)).toBe(0n);
    expect(r.amountMicro).toBe(100n);
    await voidReservation(meta.pool, r);
    expect(await extendReservation(meta.pool, r, 0n, 1n)).toBe(0n);
  });
});

describe("ChargeWriter", () => {
  it("writes many sessions' charges in few batches, one entry each, chained and ordered", async () => {
    const agents = Array.from({ length: 20 }, () => randomWallet());
    await Promise.all(agents.map((a) => depositFor(meta.pool, meta.providerId, 1_000_000n, a)));
    const reservations = await Promise.all(
      agents.map((a) =>
        reserveFunds(meta.pool, {
          agentWallet: a,
          providerId: meta.providerId,
          minMicro: 1n,
          maxMicro: 500_000n,
          ttlSeconds: 60,
        }),
      ),
    );
    let batches = 0;
    const counted = {
      query: (...args: Parameters<typeof meta.pool.query>) => {
        batches++;
        return meta.pool.query(...args);
      },
    } as never;
    const writer = new ChargeWriter(counted, { ttlSeconds: 60 });
    const writes: Promise<void>[] = [];
    for (let round = 1; round <= 10; round++) {
      reservations.forEach((r, i) => {
        writes.push(
          writer.enqueue({
            reservationId: r!.id,
            agentWallet: agents[i]!,
            providerId: meta.providerId,
            costMicro: BigInt(round),
            metadata: { round },
          }),
        );
      });
    }
    await Promise.all(writes);
    expect(batches).toBeLessThan(10);
    for (const [i, agent] of agents.entries()) {
      const entries = await expectChained(agent);
      const charges = entries.filter((e) => e.type === "query");
      expect(charges.map((e) => e.metadata.round)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
      expect(charges.map((e) => e.amountMicro)).toEqual(
        [1n, 2n, 3n, 4n, 5n, 6n, 7n, 8n, 9n, 10n].map((n) => -n),
      );
      const balance = await getBalance(meta.pool, agent, meta.providerId);
      expect(balance).toMatchObject({ balanceMicro: 1_000_000n - 55n, reservedMicro: 500_000n - 55n });
      await voidReservation(meta.pool, reservations[i]!);
    }
  });

  it("writes a charge someone waits for without gathering more (hurry)", async () => {
    const held = await heldAgent(1_000n, 100n);
    // Under load (a charge queued while a batch is written) it gathers for a second.
    const writer = new ChargeWriter(meta.pool, { ttlSeconds: 60, batchIntervalMs: 1000, gatherTickMs: 1000 });
    const charge = (costMicro: bigint) => held.charge(writer, costMicro);
    const first = charge(1n);
    const second = charge(2n);
    await first;
    const gathered = performance.now();
    const third = charge(3n);
    writer.hurry();
    await Promise.all([second, third]);
    // Without hurry it would wait out the gather: a second at least.
    expect(performance.now() - gathered).toBeLessThan(500);
    await writer.flush();
  });

  it("waits for announced charges to write them in one batch, and no longer than its bound (expect)", async () => {
    const { agent, charge } = await heldAgent(1_000n, 100n);
    let batches = 0;
    const patient = new ChargeWriter(meta.pool, {
      ttlSeconds: 60,
      expectedChargesWaitMs: 60_000,
      onBatchWritten: () => batches++,
    });
    const announced = patient.expect();
    let firstWritten = false;
    const first = charge(patient, 1n).then(() => (firstWritten = true));
    await new Promise((resolve) => setTimeout(resolve, 100));
    // An idle writer would have written it at once.
    expect(firstWritten).toBe(false);
    const second = charge(patient, 2n);
    announced();
    announced(); // a second call changes nothing
    await Promise.all([first, second]);
    expect(batches).toBe(1);

    // An announcement that never comes holds a batch back for the bound only.
    const bounded = new ChargeWriter(meta.pool, { ttlSeconds: 60, expectedChargesWaitMs: 50 });
    bounded.expect();
    const started = performance.now();
    await charge(bounded, 3n);
    expect(performance.now() - started).toBeGreaterThanOrEqual(45);
    expect(performance.now() - started).toBeLessThan(2000);
    expect((await getBalance(meta.pool, agent, meta.providerId))?.balanceMicro).toBe(1_000n - 6n);
  });

  it("charges the available balance when the reservation is gone, and never overdraws", async () => {
    const { agent, r } = await heldAgent(10n, 5n);
    await voidReservation(meta.pool, r);
    const writer = new ChargeWriter(meta.pool, { ttlSeconds: 60 });
    await writer.enqueue({
      reservationId: r.id,
      agentWallet: agent,
      providerId: meta.providerId,
      costMicro: 4n,
      metadata: {},
    });
    await expect(
      writer.enqueue({
        reservationId: r.id,
        agentWallet: agent,
        providerId: meta.providerId,
        costMicro: 7n,
        metadata: {},
      }),
    ).rejects.toThrow(/balance/);
    expect(await getBalance(meta.pool, agent, meta.providerId)).toMatchObject({
      balanceMicro: 6n,
      reservedMicro: 0n,
    });
    await expectChained(agent);
  });

  it("a charge beyond its reservation fails alone; the rest of its batch is written", async () => {
    const a = randomWallet();
    const b = randomWallet();
    await depositFor(meta.pool, meta.providerId, 100n, a);
    await depositFor(meta.pool, meta.providerId, 100n, b);
    const ra = (await reserveFunds(meta.pool, {
      agentWallet: a,
      providerId: meta.providerId,
      minMicro: 10n,
      maxMicro: 10n,
      ttlSeconds: 60,
    }))!;
    const rb = (await reserveFunds(meta.pool, {
      agentWallet: b,
      providerId: meta.providerId,
      minMicro: 10n,
      maxMicro: 10n,
      ttlSeconds: 60,
    }))!;
    const writer = new ChargeWriter(meta.pool, { ttlSeconds: 60 });
    const results = await Promise.allSettled([
      writer.enqueue({
        reservationId: ra.id,
        agentWallet: a,
        providerId: meta.providerId,
        costMicro: 3n,
        metadata: {},
      }),
      writer.enqueue({
        reservationId: rb.id,
        agentWallet: b,
        providerId: meta.providerId,
        costMicro: 50n,
        metadata: {},
      }),
      writer.enqueue({
        reservationId: ra.id,
        agentWallet: a,
        providerId: meta.providerId,
        costMicro: 4n,
        metadata: {},
      }),
    ]);
    expect(results.map((r) => r.status)).toEqual(["fulfilled", "rejected", "fulfilled"]);
    expect(await getBalance(meta.pool, a, meta.providerId)).toMatchObject({
      balanceMicro: 93n,
      reservedMicro: 3n,
    });
    expect(await getBalance(meta.pool, b, meta.providerId)).toMatchObject({
      balanceMicro: 100n,
      reservedMicro: 10n,
    });
  });

  it("survives reservations growing while their earlier charges are written (deadlock victims are retried)", async () => {
    const agent = randomWallet();
    await depositFor(meta.pool, meta.providerId, 10_000_000n, agent);
    const r = (await reserveFunds(meta.pool, {
      agentWallet: agent,
      providerId: meta.providerId,
      minMicro: 1n,
      maxMicro: 10n,
      ttlSeconds: 60,
    }))!;
    const writer = new ChargeWriter(meta.pool, { ttlSeconds: 60 });
    let charged = 0n;
    await Promise.all(
      Array.from({ length: 300 }, async (_, i) => {
        if (i % 2 === 0) {
          await extendReservation(meta.pool, r, 1n, 5n);
        } else {
          charged += 1n;
          await writer.enqueue({
            reservationId: r.id,
            agentWallet: agent,
            providerId: meta.providerId,
            costMicro: 1n,
            metadata: { i },
          });
        }
      }),
    );
    await writer.flush();
    await voidReservation(meta.pool, r);
    expect(await getBalance(meta.pool, agent, meta.providerId)).toMatchObject({
      balanceMicro: 10_000_000n - charged,
      reservedMicro: 0n,
    });
    await expectChained(agent);
  });
});
