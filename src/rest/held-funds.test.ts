import { describe, expect, it } from "vitest";
import { depositFor, randomWallet, useLedgerDatabase } from "../../test/support/fixtures.js";
import { ChargeWriter } from "../billing/charge-writer.js";
import { getBalance, listLedgerEntries } from "../billing/ledger.js";
import { HeldFunds } from "./held-funds.js";

const meta = useLedgerDatabase();

async function fundedAgent(amountMicro: bigint): Promise<string> {
  const agentWallet = await depositFor(meta.pool, meta.providerId, amountMicro);
  return agentWallet;
}

function heldFunds(lingerMs = 20) {
  const writer = new ChargeWriter(meta.pool, { ttlSeconds: 300 });
  return new HeldFunds({ ledger: meta.pool, writer, reservationTtlSeconds: 300, lingerMs });
}

async function reservationCount(agentWallet: string): Promise<number> {
  const { rows } = await meta.pool.query(
    "SELECT count(*)::int AS n FROM reservations WHERE agent_wallet = $1",
    [agentWallet],
  );
  return rows[0].n;
}

/** balance = sum of entries, each entry's balanceBefore is the previous one's balanceAfter, nothing held. */
async function expectConsistent(agentWallet: string, balanceMicro: bigint) {
  const entries = (
    await listLedgerEntries(meta.pool, agentWallet, { providerId: meta.providerId, limit: 1000 })
  ).reverse();
  let running = 0n;
  for (const entry of entries) {
    expect(entry.balanceBeforeMicro).toBe(running);
    running = entry.balanceAfterMicro;
  }
  expect(running).toBe(balanceMicro);
  expect(await getBalance(meta.pool, agentWallet, meta.providerId)).toMatchObject({
    balanceMicro,
    reservedMicro: 0n,
  });
}

describe("HeldFunds", () => {
  it("a lone request reserves, and its charge releases the rest in the same step", async () => {
    const agent = await fundedAgent(1_000_000n);
    const funds = heldFunds();
    const request = funds.join(agent, meta.providerId, 100_000n);
    expect(await request.cover(1n, 2_000n)).toBe(true);
    expect((await getBalance(meta.pool, agent, meta.providerId)).reservedMicro).toBe(2_000n);
    expect(await request.cover(2_500n)).toBe(true);
    expect((await getBalance(meta.pool, agent, meta.providerId)).reservedMicro).toBe(2_500n);
    await request.charge(2_500n, { sql: "SELECT 1", rowCount: 1 });
    await expectConsistent(agent, 997_500n);
    const [entry] = await listLedgerEntries(meta.pool, agent, { providerId: meta.providerId, limit: 1 });
    expect(entry).toMatchObject({ amountMicro: -2_500n, metadata: { sql: "SELECT 1", rowCount: 1 } });
  });

  it("refuses when nothing is available and holds nothing afterwards", async () => {
    const funds = heldFunds();
    const broke = funds.join(randomWallet(), meta.providerId, 100n);
    expect(await broke.cover(1n)).toBe(false);
    await broke.release();
    const agent = await fundedAgent(1_000n);
    const request = funds.join(agent, meta.providerId, 100n);
    expect(await request.cover(1n)).toBe(true);
    expect(await request.cover(1_001n)).toBe(false);
    await request.release();
    await expectConsistent(agent, 1_000n);
  });

  it("requests at the same time share one reservation and are all charged, each with its own entry", async () => {
    const agent = await fundedAgent(10_000_000n);
    const funds = heldFunds();
    const requests = Array.from({ length: 20 }, () => funds.join(agent, meta.providerId, 50_000n));
    expect((await Promise.all(requests.map((r) => r.cover(1n)))).every(Boolean)).toBe(true);
    expect(await reservationCount(agent)).toBe(1);
    expect((await Promise.all(requests.map((r) => r.cover(7_000n)))).every(Boolean)).toBe(true);
    await Promise.all(requests.map((r, i) => r.charge(7_000n, { sql: `q${i}`, rowCount: 1 })));
    await funds.closeAll();
    await expectConsistent(agent, 10_000_000n - 20n * 7_000n);
    const entries = await listLedgerEntries(meta.pool, agent, { providerId: meta.providerId, limit: 100 });
    expect(entries.filter((e) => e.type === "query")).toHaveLength(20);
  });

  it("a request sharing a hold is answered only once its charge is durable (charge() waits for the group commit)", async () => {
    const agent = await fundedAgent(1_000_000n);
    const funds = heldFunds(5_000);
    const [a, b] = [funds.join(agent, meta.providerId, 10_000n), funds.join(agent, meta.providerId, 10_000n)];
    await Promise.all([a.cover(300n), b.cover(400n)]);
    // Another transaction holds the agent's balance row: the group commit of a's charge must wait for it.
    const blocker = await meta.pool.connect();
    await blocker.query("BEGIN");
    await blocker.query("SELECT 1 FROM balances WHERE agent_wallet = $1 AND provider_id = $2 FOR UPDATE", [
      agent,
      meta.providerId,
    ]);
    let answered = false;
    const charged = a.charge(300n, { sql: "a", rowCount: 3 }).then(() => {
      answered = true;
    });
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(answered).toBe(false);
    await blocker.query("ROLLBACK");
    blocker.release();
    await charged;
    const entries = await listLedgerEntries(meta.pool, agent, { providerId: meta.providerId, limit: 10 });
    expect(entries.filter((e) => e.type === "query").map((e) => e.amountMicro)).toEqual([-300n]);
    await b.charge(400n, { sql: "b", rowCount: 4 });
    await funds.closeAll();
    await expectConsistent(agent, 1_000_000n - 700n);
  });

  it("a shared hold is released after its last request, unless another comes", async () => {
    const agent = await fundedAgent(1_000_000n);
    const funds = heldFunds(100);
    const [a, b] = [funds.join(agent, meta.providerId, 10_000n), funds.join(agent, meta.providerId, 10_000n)];
    await Promise.all([a.cover(100n), b.cover(100n)]);
    await Promise.all([a.charge(100n, {}), b.charge(100n, {})]);
    expect(await reservationCount(agent)).toBe(1);
    const c = funds.join(agent, meta.providerId, 10_000n);
    expect(await c.cover(100n)).toBe(true);
    await c.charge(100n, {});
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(await reservationCount(agent)).toBe(0);
    await expectConsistent(agent, 1_000_000n - 300n);
  });

  it("a request that needs funds still held by a hold being released waits for the release", async () => {
    const agent = await fundedAgent(10_000n);
    const funds = heldFunds(60_000);
    const [a, b] = [funds.join(agent, meta.providerId, 50_000n), funds.join(agent, meta.providerId, 50_000n)];
    await Promise.all([a.cover(1n), b.cover(1n)]);
    // Beyond what the requests need, a hold takes a quarter of what is available.
    expect((await getBalance(meta.pool, agent, meta.providerId)).reservedMicro).toBe(2_500n);
    await Promise.all([a.charge(1n, {}), b.charge(1n, {})]);
    const closing = funds.closeAll(); // the lingering hold is being released, not yet released
    const c = funds.join(agent, meta.providerId, 50_000n);
    expect(await c.cover(9_998n)).toBe(true);
    await c.charge(9_998n, {});
    await closing;
    await expectConsistent(agent, 0n);
  });

  it("keeps a busy agent's hold between its requests, and gives back at once what a refused one held", async () => {
    const agent = await fundedAgent(100_000n);
    const funds = heldFunds(60_000);
    const reservations = async () =>
      (
        await meta.pool.query<{ n: number }>(
          "SELECT count(*)::int AS n FROM ledger_entries WHERE agent_wallet = $1 AND type = 'query'",
          [agent],
        )
      ).rows[0]!.n;
    // The first request is alone: charged and released in one statement before its answer.
    const first = funds.join(agent, meta.providerId, 5_000n);
    expect(await first.cover(100n)).toBe(true);
    await first.charge(100n, {});
    expect(await reservationCount(agent)).toBe(0);
    // The next, right after it, is a busy agent's: its hold stays for the one after, which reserves nothing.
    const second = funds.join(agent, meta.providerId, 5_000n);
    expect(await second.cover(100n)).toBe(true);
    await second.charge(100n, {});
    expect(await reservationCount(agent)).toBe(1);
    const held = (await getBalance(meta.pool, agent, meta.providerId)).reservedMicro;
    const third = funds.join(agent, meta.providerId, 5_000n);
    expect(await third.cover(100n)).toBe(true);
    expect((await getBalance(meta.pool, agent, meta.providerId)).reservedMicro).toBe(held);
    await third.charge(100n, {});
    expect(await reservations()).toBe(3);
    // A request refused for want of funds lets the hold go before its answer.
    const refused = funds.join(agent, meta.providerId, 5_000n);
    expect(await refused.cover(1_000_000n)).toBe(false);
    await refused.release();
    expect(await reservationCount(agent)).toBe(0);
    await expectConsistent(agent, 99_700n);
  });

  it("never lets concurrent requests spend more than the balance", async () => {
    const agent = await fundedAgent(10_000n); // pays for 10 requests of 1 000
    const funds = heldFunds();
    const requests = Array.from({ length: 25 }, () => funds.join(agent, meta.providerId, 3_000n));
    const covered = await Promise.all(
      requests.map(async (request) => (await request.cover(1n)) && (await request.cover(1_000n))),
    );
    const paid = covered.filter(Boolean).length;
    // At most what the balance pays for; fewer when refused requests still held crumbs at that moment.
    expect(paid).toBeGreaterThan(0);
    expect(paid).toBeLessThanOrEqual(10);
    await Promise.all(
      requests.map((request, i) => (covered[i] ? request.charge(1_000n, { i }) : request.release())),
    );
    await funds.closeAll();
    await expectConsistent(agent, 10_000n - BigInt(paid) * 1_000n);
  });
});
