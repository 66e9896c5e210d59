import { describe, expect, it } from "vitest";
import { randomTxHash, randomWallet, useLedgerDatabase } from "../../test/support/fixtures.js";
import { createMetadataPool } from "../db/pool.js";
import {
  creditDeposit,
  getBalance,
  InsufficientFundsError,
  listLedgerEntries,
  releaseExpiredReservations,
  releaseWithCharge,
  reserveFunds,
  voidReservation,
} from "./ledger.js";

const meta = useLedgerDatabase();

let txCounter = 0n;
async function deposit(agentWallet: string, amountMicro: bigint) {
  txCounter++;
  return creditDeposit(meta.pool, {
    chainId: 8453,
    txHash: randomTxHash(),
    agentWallet,
    providerId: meta.providerId,
    amountMicro,
    blockNumber: txCounter,
  });
}

/** balance = sum(entries) and balanceBefore/After chain without gaps, oldest first. */
async function expectLedgerConsistent(agentWallet: string) {
  const entries = (
    await listLedgerEntries(meta.pool, agentWallet, { providerId: meta.providerId, limit: 100_000 })
  ).reverse();
  let running = 0n;
  for (const entry of entries) {
    expect(entry.balanceBeforeMicro).toBe(running);
    expect(entry.balanceAfterMicro).toBe(entry.balanceBeforeMicro + entry.amountMicro);
    expect(entry.balanceAfterMicro >= 0n).toBe(true);
    running = entry.balanceAfterMicro;
  }
  const balance = await getBalance(meta.pool, agentWallet, meta.providerId);
  expect(balance.balanceMicro).toBe(running);
  return { entries, balance };
}

describe("reservations", () => {
  it("holds at most what is available, charges the actual cost and releases the rest", async () => {
    const agent = randomWallet();
    await deposit(agent, 1000n);
    const r = await reserveFunds(meta.pool, {
      agentWallet: agent,
      providerId: meta.providerId,
      minMicro: 1n,
      maxMicro: 5000n,
      ttlSeconds: 60,
    });
    expect(r?.amountMicro).toBe(1000n);
    expect(
      await reserveFunds(meta.pool, {
        agentWallet: agent,
        providerId: meta.providerId,
        minMicro: 1n,
        maxMicro: 1n,
        ttlSeconds: 60,
      }),
    ).toBeNull();
    const entry = await releaseWithCharge(meta.pool, r!, 300n, { sql: "SELECT 1", rowCount: 3 });
    expect(entry?.amountMicro).toBe(-300n);
    expect(entry?.metadata).toEqual({ sql: "SELECT 1", rowCount: 3 });
    const balance = await getBalance(meta.pool, agent, meta.providerId);
    expect(balance).toMatchObject({ balanceMicro: 700n, reservedMicro: 0n });
    await expectLedgerConsistent(agent);
  });

  it("refuses to charge more than the agent can pay, changing nothing", async () => {
    const agent = randomWallet();
    await deposit(agent, 100n);
    const r = await reserveFunds(meta.pool, {
      agentWallet: agent,
      providerId: meta.providerId,
      minMicro: 0n,
      maxMicro: 50n,
      ttlSeconds: 60,
    });
    await expect(releaseWithCharge(meta.pool, r!, 101n, {})).rejects.toBeInstanceOf(InsufficientFundsError);
    expect(await getBalance(meta.pool, agent, meta.providerId)).toMatchObject({
      balanceMicro: 100n,
      reservedMicro: 50n,
    });
    // more than reserved but within the balance is fine
    await releaseWithCharge(meta.pool, r!, 100n, {});
    expect(await getBalance(meta.pool, agent, meta.providerId)).toMatchObject({
      balanceMicro: 0n,
      reservedMicro: 0n,
    });
  });

  it("a charge cannot eat into another statement's reservation", async () => {
    const agent = randomWallet();
    await deposit(agent, 100n);
    const a = await reserveFunds(meta.pool, {
      agentWallet: agent,
      providerId: meta.providerId,
      minMicro: 60n,
      maxMicro: 60n,
      ttlSeconds: 60,
    });
    const b = await reserveFunds(meta.pool, {
      agentWallet: agent,
      providerId: meta.providerId,
      minMicro: 0n,
      maxMicro: 10n,
      ttlSeconds: 60,
    });
    await expect(releaseWithCharge(meta.pool, b!, 41n, {})).rejects.toBeInstanceOf(InsufficientFundsError);
    await releaseWithCharge(meta.pool, b!, 40n, {});
    await releaseWithCharge(meta.pool, a!, 60n, {});
    await expectLedgerConsistent(agent);
    expect((await getBalance(meta.pool, agent, meta.providerId)).balanceMicro).toBe(0n);
  });

  it("void releases the hold without a ledger entry; zero-cost releases leave none either", async () => {
    const agent = randomWallet();
    await deposit(agent, 10n);
    const r = await reserveFunds(meta.pool, {
      agentWallet: agent,
      providerId: meta.providerId,
      minMicro: 10n,
      maxMicro: 10n,
      ttlSeconds: 60,
    });
    await voidReservation(meta.pool, r!);
    await voidReservation(meta.pool, r!);
    const r2 = await reserveFunds(meta.pool, {
      agentWallet: agent,
      providerId: meta.providerId,
      minMicro: 10n,
      maxMicro: 10n,
      ttlSeconds: 60,
    });
    expect(await releaseWithCharge(meta.pool, r2!, 0n, {})).toBeNull();
    const { entries, balance } = await expectLedgerConsistent(agent);
    expect(entries).toHaveLength(1);
    expect(balance).toMatchObject({ balanceMicro: 10n, reservedMicro: 0n });
  });

  it("expired reservations are released, and charging one afterwards takes the available balance", async () => {
    const agent = randomWallet();
    await deposit(agent, 100n);
    const r = await reserveFunds(meta.pool, {
      agentWallet: agent,
      providerId: meta.providerId,
      minMicro: 80n,
      maxMicro: 80n,
      ttlSeconds: 60,
    });
    await meta.pool.query("UPDATE reservations SET expires_at = now() - interval '1 second' WHERE id = $1", [
      r!.id,
    ]);
    expect(await releaseExpiredReservations(meta.pool)).toBeGreaterThanOrEqual(1);
    expect(await getBalance(meta.pool, agent, meta.providerId)).toMatchObject({ reservedMicro: 0n });
    await releaseWithCharge(meta.pool, r!, 30n, {});
    expect(await getBalance(meta.pool, agent, meta.providerId)).toMatchObject({
      balanceMicro: 70n,
      reservedMicro: 0n,
    });
    await expectLedgerConsistent(agent);
  });

  it("an agent with no balance gets no reservation", async () => {
    expect(
      await reserveFunds(meta.pool, {
        agentWallet: randomWallet(),
        providerId: meta.providerId,
        minMicro: 0n,
        maxMicro: 1n,
        ttlSeconds: 60,
      }),
    ).toBeNull();
  });
});

describe("ledger integrity", () => {
  it("is append-only", async () => {
    const agent = randomWallet();
    await deposit(agent, 5n);
    await expect(
      meta.pool.query("UPDATE ledger_entries SET amount_micro = 1 WHERE agent_wallet = $1", [agent]),
    ).rejects.toThrow(/append-only/);
    await expect(
      meta.pool.query("DELETE FROM ledger_entries WHERE agent_wallet = $1", [agent]),
    ).rejects.toThrow(/append-only/);
  });

  it("the database itself refuses a negative balance", async () => {
    const agent = randomWallet();
    await deposit(agent, 5n);
    await expect(
      meta.pool.query("UPDATE balances SET balance_micro = -1 WHERE agent_wallet = $1", [agent]),
    ).rejects.toThrow(/check constraint/);
  });

  it("200 concurrent charges through several connections never overdraw and keep balance = sum(ledger)", async () => {
    const agent = randomWallet();
    await deposit(agent, 1000n);
    const pools = Array.from({ length: 4 }, () => createMetadataPool(meta.db.url, 10));
    let charged = 0;
    let refused = 0;
    try {
      await Promise.all(
        Array.from({ length: 200 }, async (_, i) => {
          const pool = pools[i % pools.length]!;
          const cost = 7n;
          // Half reserve the exact cost; half reserve too little and must find the rest when charged.
          const held = i % 2 === 0 ? cost : 3n;
          const r = await reserveFunds(pool, {
            agentWallet: agent,
            providerId: meta.providerId,
            minMicro: held,
            maxMicro: held,
            ttlSeconds: 60,
          });
          if (!r) {
            refused++;
            return;
          }
          try {
            await releaseWithCharge(pool, r, cost, { sql: `SELECT ${i}`, rowCount: 7 });
            charged++;
          } catch (error) {
            expect(error).toBeInstanceOf(InsufficientFundsError);
            await voidReservation(pool, r);
            refused++;
          }
        }),
      );
    } finally {
      await Promise.all(pools.map((pool) => pool.end()));
    }
    const { balance, entries } = await expectLedgerConsistent(agent);
    expect(charged + refused).toBe(200);
    // floor(1000 / 7) = 142 charges fit; a charge may be refused while others hold funds, never more.
    expect(charged).toBeLessThanOrEqual(142);
    expect(charged).toBeGreaterThan(100);
    expect(balance).toMatchObject({ balanceMicro: 1000n - 7n * BigInt(charged), reservedMicro: 0n });
    expect(entries.filter((e) => e.type === "query")).toHaveLength(charged);
  });

  it("200 concurrent exact reservations take exactly what the balance pays for", async () => {
    const agent = randomWallet();
    await deposit(agent, 1000n);
    const pools = Array.from({ length: 4 }, () => createMetadataPool(meta.db.url, 10));
    const outcomes = await Promise.all(
      Array.from({ length: 200 }, async (_, i) => {
        const pool = pools[i % pools.length]!;
        const r = await reserveFunds(pool, {
          agentWallet: agent,
          providerId: meta.providerId,
          minMicro: 7n,
          maxMicro: 7n,
          ttlSeconds: 60,
        });
        if (!r) return false;
        await releaseWithCharge(pool, r, 7n, { sql: `SELECT ${i}`, rowCount: 7 });
        return true;
      }),
    ).finally(() => Promise.all(pools.map((pool) => pool.end())));
    expect(outcomes.filter(Boolean)).toHaveLength(142);
    const { balance } = await expectLedgerConsistent(agent);
    expect(balance).toMatchObject({ balanceMicro: 6n, reservedMicro: 0n });
  });

  it("50 concurrent credits of one transaction hash credit it exactly once", async () => {
    const agent = randomWallet();
    const txHash = randomTxHash();
    const clients = Array.from({ length: 5 }, () => createMetadataPool(meta.db.url, 10));
    try {
      const results = await Promise.all(
        Array.from({ length: 50 }, (_, i) =>
          creditDeposit(clients[i % clients.length]!, {
            chainId: 8453,
            txHash,
            agentWallet: agent,
            providerId: meta.providerId,
            amountMicro: 1_000_000n,
            blockNumber: 1n,
          }),
        ),
      );
      expect(results.filter((r) => r !== null)).toHaveLength(1);
    } finally {
      await Promise.all(clients.map((pool) => pool.end()));
    }
    const { balance } = await expectLedgerConsistent(agent);
    expect(balance.balanceMicro).toBe(1_000_000n);
  });
});
