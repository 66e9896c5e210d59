import type pg from "pg";
import { describe, expect, it } from "vitest";
import { randomTxHash, randomWallet, useLedgerDatabase } from "../../test/support/fixtures.js";
import { createMetadataPool } from "../db/pool.js";
import { clearDailyLimit, dailyLimitRefusing, getDailyLimit, setDailyLimit } from "./daily-limits.js";
import {
  chargeReservations,
  creditDeposit,
  extendReservation,
  getBalance,
  releaseWithCharge,
  reserveFunds,
} from "./ledger.js";

const meta = useLedgerDatabase();

async function deposit(agentWallet: string, amountMicro: bigint) {
  await creditDeposit(meta.pool, {
    chainId: 8453,
    txHash: randomTxHash(),
    agentWallet,
    providerId: meta.providerId,
    amountMicro,
    blockNumber: 1n,
  });
}

const hold = (agentWallet: string, minMicro: bigint, maxMicro: bigint, db: pg.Pool = meta.pool) =>
  reserveFunds(db, { agentWallet, providerId: meta.providerId, minMicro, maxMicro, ttlSeconds: 60 });

describe("daily limits in the ledger", () => {
  it("bounds every hold by today's remainder, counting what is held and what was charged", async () => {
    const agent = randomWallet();
    await deposit(agent, 1_000_000n);
    await setDailyLimit(meta.pool, agent, meta.providerId, 5000n);
    const first = await hold(agent, 1n, 100_000n);
    expect(first?.amountMicro).toBe(5000n);
    expect(await hold(agent, 1n, 10n)).toBeNull();
    await releaseWithCharge(meta.pool, first!, 3000n, {});
    expect(await getDailyLimit(meta.pool, agent, meta.providerId)).toMatchObject({
      dailyLimitMicro: 5000n,
      spentTodayMicro: 3000n,
      remainingTodayMicro: 2000n,
    });
    const second = await hold(agent, 1n, 100_000n);
    expect(second?.amountMicro).toBe(2000n);
    expect(await extendReservation(meta.pool, second!, 1n, 100n)).toBe(0n);
    await chargeReservations(meta.pool, [
      {
        reservationId: second!.id,
        agentWallet: agent,
        providerId: meta.providerId,
        costMicro: 2000n,
        metadata: {},
      },
    ]);
    expect((await getDailyLimit(meta.pool, agent, meta.providerId)).remainingTodayMicro).toBe(0n);
    expect(await hold(agent, 1n, 1n)).toBeNull();
    expect((await getBalance(meta.pool, agent, meta.providerId)).balanceMicro).toBe(995_000n);
  });

  it("says when the limit, not the balance, refuses a hold", async () => {
    const agent = randomWallet();
    await deposit(agent, 1000n);
    expect(await dailyLimitRefusing(meta.pool, agent, meta.providerId, 2000n)).toBeNull();
    await setDailyLimit(meta.pool, agent, meta.providerId, 100n);
    expect(await dailyLimitRefusing(meta.pool, agent, meta.providerId, 500n)).toMatchObject({
      dailyLimitMicro: 100n,
    });
    // Short of balance as well: that is what it is told.
    expect(await dailyLimitRefusing(meta.pool, agent, meta.providerId, 5000n)).toBeNull();
  });

  it("says so still when the holds that kept the remainder were given back before it is asked", async () => {
    const agent = randomWallet();
    await deposit(agent, 1_000_000n);
    await setDailyLimit(meta.pool, agent, meta.providerId, 1000n);
    // Another session of the agent holds today's remainder: this hold is refused by the limit...
    const other = await hold(agent, 1n, 1000n);
    expect(await hold(agent, 100n, 100n)).toBeNull();
    // ...and that session gives it back (or is charged part of it) before the refused one asks why.
    await releaseWithCharge(meta.pool, other!, 300n, {});
    expect(await dailyLimitRefusing(meta.pool, agent, meta.providerId, 100n)).toMatchObject({
      dailyLimitMicro: 1000n,
      spentTodayMicro: 300n,
    });
  });

  it("counts charges made before the limit was set, and forgets them at the next UTC day", async () => {
    const agent = randomWallet();
    await deposit(agent, 10_000n);
    const r = await hold(agent, 1n, 1000n);
    await releaseWithCharge(meta.pool, r!, 700n, {});
    const limit = await setDailyLimit(meta.pool, agent, meta.providerId, 1000n);
    expect(limit.spentTodayMicro).toBe(700n);
    expect(limit.resetsAt.getTime() - Date.now()).toBeLessThanOrEqual(86_400_000);
    expect(limit.resetsAt.toISOString()).toMatch(/T00:00:00\.000Z$/);
    expect((await hold(agent, 1n, 1000n))?.amountMicro).toBe(300n);
    // Yesterday's spending does not count today.
    await meta.pool.query(
      "UPDATE balances SET spent_day = spent_day - 1 WHERE agent_wallet = $1 AND provider_id = $2",
      [agent, meta.providerId],
    );
    expect((await getDailyLimit(meta.pool, agent, meta.providerId)).spentTodayMicro).toBe(0n);
    expect((await hold(agent, 1n, 1000n))?.amountMicro).toBe(700n); // 1000 minus the 300 still held
    expect(await clearDailyLimit(meta.pool, agent, meta.providerId)).toBe(true);
    expect(await clearDailyLimit(meta.pool, agent, meta.providerId)).toBe(false);
    expect((await getDailyLimit(meta.pool, agent, meta.providerId)).dailyLimitMicro).toBeNull();
  });

  it("can be set before the first deposit", async () => {
    const agent = randomWallet();
    await setDailyLimit(meta.pool, agent, meta.providerId, 100n);
    await deposit(agent, 5000n);
    expect((await hold(agent, 1n, 5000n))?.amountMicro).toBe(100n);
  });

  it("holds exactly under concurrent holds from separate connections", async () => {
    const agent = randomWallet();
    await deposit(agent, 1_000_000n);
    await setDailyLimit(meta.pool, agent, meta.providerId, 10_000n);
    const pools = [0, 1].map(() => createMetadataPool(meta.db.url, 10));
    try {
      const holds = await Promise.all(
        Array.from({ length: 40 }, (_, i) => hold(agent, 300n, 300n, pools[i % 2]!)),
      );
      const held = holds.reduce((sum, h) => sum + (h?.amountMicro ?? 0n), 0n);
      expect(held).toBe(9900n); // 33 holds of 300: the 34th would pass 10 000
      expect((await getBalance(meta.pool, agent, meta.providerId)).reservedMicro).toBe(9900n);
    } finally {
      await Promise.all(pools.map((pool) => pool.end()));
    }
  });
});
