import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createMetadataDatabase } from "../../test/support/database.js";
import { insertProvider, randomTxHash, randomWallet } from "../../test/support/fixtures.js";
import { creditDeposit, listLedgerEntries, releaseWithCharge, reserveFunds } from "./ledger.js";

let meta: Awaited<ReturnType<typeof createMetadataDatabase>>;
let providers: string[];

beforeAll(async () => {
  meta = await createMetadataDatabase();
  providers = [
    await insertProvider(meta.pool),
    await insertProvider(meta.pool),
    await insertProvider(meta.pool),
  ];
});
afterAll(async () => meta?.close());

async function charge(agentWallet: string, providerId: string, n: number) {
  const r = await reserveFunds(meta.pool, {
    agentWallet,
    providerId,
    minMicro: 1n,
    maxMicro: 1n,
    ttlSeconds: 60,
  });
  await releaseWithCharge(meta.pool, r!, 1n, { sql: `SELECT ${n}`, rowCount: 1 });
}

describe("listLedgerEntries", () => {
  it("merges an agent's providers newest first, and filters one provider, both within the limit", async () => {
    const agent = randomWallet();
    const other = randomWallet();
    for (const providerId of [...providers, providers[0]!]) {
      for (const wallet of [agent, other])
        await creditDeposit(meta.pool, {
          chainId: 8453,
          txHash: randomTxHash(),
          agentWallet: wallet,
          providerId,
          amountMicro: 1000n,
          blockNumber: 1n,
        });
    }
    // Interleaved across providers, and another agent's entries in between.
    for (let n = 0; n < 30; n++) {
      await charge(agent, providers[n % 3]!, n);
      await charge(other, providers[n % 3]!, n);
    }
    const all = await listLedgerEntries(meta.pool, agent, { limit: 100 });
    expect(all).toHaveLength(34);
    expect(all.every((e) => e.agentWallet === agent)).toBe(true);
    const ids = all.map((e) => e.id);
    expect(ids).toEqual([...ids].sort((a, b) => (a > b ? -1 : 1)));

    const newest = await listLedgerEntries(meta.pool, agent, { limit: 5 });
    expect(newest.map((e) => e.metadata.sql)).toEqual([29, 28, 27, 26, 25].map((n) => `SELECT ${n}`));

    const one = await listLedgerEntries(meta.pool, agent, { providerId: providers[1]!, limit: 3 });
    expect(one.map((e) => e.metadata.sql)).toEqual([28, 25, 22].map((n) => `SELECT ${n}`));
    expect(one.every((e) => e.providerId === providers[1])).toBe(true);

    expect(await listLedgerEntries(meta.pool, agent, { providerId: randomUUID(), limit: 3 })).toEqual([]);
    expect(await listLedgerEntries(meta.pool, randomWallet(), { limit: 3 })).toEqual([]);
  });
});
