import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createMetadataDatabase } from "../../test/support/database.js";
import { insertProvider, randomTxHash, randomWallet } from "../../test/support/fixtures.js";
import { ChargeWriter } from "./charge-writer.js";
import {
  creditDeposit,
  extendReservation,
  getBalance,
  listLedgerEntries,
  reserveFunds,
  voidReservation,
} from "./ledger.js";

let meta: Awaited<ReturnType<typeof createMetadataDatabase>>;
let providerId: string;

beforeAll(async () => {
  meta = await createMetadataDatabase();
  providerId = await insertProvider(meta.pool);
});
afterAll(async () => meta?.close());

async function fund(agentWallet: string, amountMicro: bigint) {
  await creditDeposit(meta.pool, {
    chainId: 8453,
    txHash: randomTxHash(),
    agentWallet,
    providerId,
    amountMicro,
    blockNumber: 1n,
  });
}

async function expectChained(agentWallet: string) {
  const entries = (await listLedgerEntries(meta.pool, agentWallet, { providerId, limit: 100_000 })).reverse();
  let running = 0n;
  for (const entry of entries) {
    expect(entry.balanceBeforeMicro).toBe(running);
    running = entry.balanceAfterMicro;
  }
  expect((await getBalance(meta.pool, agentWallet, providerId)).balanceMicro).toBe(running);
  return entries;
}

describe("extendReservation", () => {
  it("adds what is available between min and max, and nothing below min", async () => {
    const agent = randomWallet();
    await fund(agent, 100n);
    const r = (await reserveFunds(meta.pool, {
      agentWallet: agent,
      providerId,
      minMicro: 10n,
      maxMicro: 10n,
      ttlSeconds: 60,
    }))!;
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
    await Promise.all(agents.map((a) => fund(a, 1_000_000n)));
    const reservations = await Promise.all(
      agents.map((a) =>
        reserveFunds(meta.pool, {
          agentWallet: a,
          providerId,
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
            providerId,
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
      const balance = await getBalance(meta.pool, agent, providerId);
      expect(balance).toMatchObject({ balanceMicro: 1_000_000n - 55n, reservedMicro: 500_000n - 55n });
      await voidReservation(meta.pool, reservations[i]!);
    }
  });

  it("charges the available balance when the reservation is gone, and never overdraws", async () => {
    const agent = randomWallet();
    await fund(agent, 10n);
    const r = (await reserveFunds(meta.pool, {
      agentWallet: agent,
      providerId,
      minMicro: 5n,
      maxMicro: 5n,
      ttlSeconds: 60,
    }))!;
    await voidReservation(meta.pool, r);
    const writer = new ChargeWriter(meta.pool, { ttlSeconds: 60 });
    await writer.enqueue({
      reservationId: r.id,
      agentWallet: agent,
      providerId,
      costMicro: 4n,
      metadata: {},
    });
    await expect(
      writer.enqueue({ reservationId: r.id, agentWallet: agent, providerId, costMicro: 7n, metadata: {} }),
    ).rejects.toThrow(/balance/);
    expect(await getBalance(meta.pool, agent, providerId)).toMatchObject({
      balanceMicro: 6n,
      reservedMicro: 0n,
    });
    await expectChained(agent);
  });

  it("a charge beyond its reservation fails alone; the rest of its batch is written", async () => {
    const a = randomWallet();
    const b = randomWallet();
    await fund(a, 100n);
    await fund(b, 100n);
    const ra = (await reserveFunds(meta.pool, {
      agentWallet: a,
      providerId,
      minMicro: 10n,
      maxMicro: 10n,
      ttlSeconds: 60,
    }))!;
    const rb = (await reserveFunds(meta.pool, {
      agentWallet: b,
      providerId,
      minMicro: 10n,
      maxMicro: 10n,
      ttlSeconds: 60,
    }))!;
    const writer = new ChargeWriter(meta.pool, { ttlSeconds: 60 });
    const results = await Promise.allSettled([
      writer.enqueue({ reservationId: ra.id, agentWallet: a, providerId, costMicro: 3n, metadata: {} }),
      writer.enqueue({ reservationId: rb.id, agentWallet: b, providerId, costMicro: 50n, metadata: {} }),
      writer.enqueue({ reservationId: ra.id, agentWallet: a, providerId, costMicro: 4n, metadata: {} }),
    ]);
    expect(results.map((r) => r.status)).toEqual(["fulfilled", "rejected", "fulfilled"]);
    expect(await getBalance(meta.pool, a, providerId)).toMatchObject({
      balanceMicro: 93n,
      reservedMicro: 3n,
    });
    expect(await getBalance(meta.pool, b, providerId)).toMatchObject({
      balanceMicro: 100n,
      reservedMicro: 10n,
    });
  });

  it("survives reservations growing while their earlier charges are written (deadlock victims are retried)", async () => {
    const agent = randomWallet();
    await fund(agent, 10_000_000n);
    const r = (await reserveFunds(meta.pool, {
      agentWallet: agent,
      providerId,
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
            providerId,
            costMicro: 1n,
            metadata: { i },
          });
        }
      }),
    );
    await writer.flush();
    await voidReservation(meta.pool, r);
    expect(await getBalance(meta.pool, agent, providerId)).toMatchObject({
      balanceMicro: 10_000_000n - charged,
      reservedMicro: 0n,
    });
    await expectChained(agent);
  });
});
