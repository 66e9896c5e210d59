import { describe, expect, it } from "vitest";
import { randomTxHash, randomWallet, useLedgerDatabase } from "../../test/support/fixtures.js";
import { creditDeposit, getBalance, listLedgerEntries } from "./ledger.js";
import { LedgerHold } from "./ledger-hold.js";

const meta = useLedgerDatabase();

async function fundedAgent(amountMicro: bigint): Promise<string> {
  const agentWallet = randomWallet();
  await creditDeposit(meta.pool, {
    chainId: 8453,
    txHash: randomTxHash(),
    agentWallet,
    providerId: meta.providerId,
    amountMicro,
    blockNumber: 1n,
  });
  return agentWallet;
}

const holdFor = (agentWallet: string) => new LedgerHold(meta.pool, agentWallet, meta.providerId, 60);

describe("a ledger hold", () => {
  it("takes one reservation and extends it, all or nothing for the minimum", async () => {
    const agent = await fundedAgent(1000n);
    const hold = holdFor(agent);
    expect(await hold.add(100n, 300n)).toBe(300n);
    const id = hold.reservationId;
    expect(id).not.toBeNull();
    expect(await hold.add(0n, 500n)).toBe(500n);
    expect(await hold.add(300n, 400n)).toBe(0n); // 200 left: below the minimum, nothing changes
    expect(await hold.add(0n, 400n)).toBe(200n);
    expect(hold.reservationId).toBe(id);
    expect(await getBalance(meta.pool, agent, meta.providerId)).toMatchObject({ reservedMicro: 1000n });
  });

  it("holds nothing when the balance cannot pay the minimum", async () => {
    const hold = holdFor(await fundedAgent(50n));
    expect(await hold.add(51n, 100n)).toBe(0n);
    expect(hold.reservationId).toBeNull();
    expect(await holdFor(randomWallet()).add(1n, 1n)).toBe(0n);
  });

  it("writes its last charge with the release, or gives everything back, and is not reused", async () => {
    const agent = await fundedAgent(1000n);
    const charged = holdFor(agent);
    await charged.add(0n, 400n);
    await charged.release({ costMicro: 123n, metadata: { statements: 1 }, key: crypto.randomUUID() });
    expect(await getBalance(meta.pool, agent, meta.providerId)).toMatchObject({
      balanceMicro: 877n,
      reservedMicro: 0n,
    });
    const entries = await listLedgerEntries(meta.pool, agent, { providerId: meta.providerId, limit: 10 });
    expect(entries.filter((e) => e.type === "query").map((e) => e.amountMicro)).toEqual([-123n]);
    await expect(charged.add(0n, 1n)).rejects.toThrow(/released/);

    const voided = holdFor(agent);
    await voided.add(0n, 500n);
    await voided.release({ costMicro: 0n, metadata: {} });
    await holdFor(agent).release(); // nothing held: nothing to do
    expect(await getBalance(meta.pool, agent, meta.providerId)).toMatchObject({
      balanceMicro: 877n,
      reservedMicro: 0n,
    });
  });

  it("gives the hold back without the charge when asked to, if the charge cannot be written", async () => {
    const agent = await fundedAgent(100n);
    const hold = holdFor(agent);
    await hold.add(0n, 100n);
    // More than the balance: the charge statement fails on the balance's CHECK.
    await expect(hold.release({ costMicro: 101n, metadata: {} }, true)).rejects.toThrow();
    expect(await getBalance(meta.pool, agent, meta.providerId)).toMatchObject({
      balanceMicro: 100n,
      reservedMicro: 0n,
    });
  });
});
