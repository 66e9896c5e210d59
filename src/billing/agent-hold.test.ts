import { describe, expect, it } from "vitest";
import { depositFor, useLedgerDatabase } from "../../test/support/fixtures.js";
import { watchedLedger } from "../../test/support/watched-ledger.js";
import { AgentHold, type AgentHoldOptions } from "./agent-hold.js";
import { ChargeWriter } from "./charge-writer.js";
import { getBalance, listLedgerEntries, type Queryable } from "./ledger.js";

const meta = useLedgerDatabase();

function holdOf(
  agent: string,
  options: Partial<AgentHoldOptions> = {},
  db: Queryable = meta.pool,
): AgentHold {
  const writer = new ChargeWriter(db, { ttlSeconds: 60 });
  return new AgentHold(db, writer, agent, meta.providerId, { ttlSeconds: 60, baseMicro: 100n, ...options });
}

/** The ledger, with the names of the statements that ran, and a gate each statement named `gated` waits at. */
function gatedLedger(gated?: string) {
  const seen: string[] = [];
  let open = () => {};
  const gate = new Promise<void>((resolve) => (open = resolve));
  const db = watchedLedger(meta.pool, (name) => {
    seen.push(name);
    return name === gated ? gate : undefined;
  });
  return { db, seen, open };
}

async function queryCharges(agent: string): Promise<bigint[]> {
  const entries = await listLedgerEntries(meta.pool, agent, { providerId: meta.providerId, limit: 100 });
  return entries.filter((entry) => entry.type === "query").map((entry) => entry.amountMicro);
}

/** The agent's balance and what is reserved of it. */
async function balanceOf(agent: string): Promise<[bigint, bigint]> {
  const { balanceMicro, reservedMicro } = await getBalance(meta.pool, agent, meta.providerId);
  return [balanceMicro, reservedMicro];
}

async function reservations(agent: string): Promise<number> {
  const { rows } = await meta.pool.query<{ n: number }>(
    "SELECT count(*)::int AS n FROM reservations WHERE agent_wallet = $1",
    [agent],
  );
  return rows[0]!.n;
}

describe("an agent's hold", () => {
  it("makes needs that come together wait for the one top-up in flight rather than reserve beside it", async () => {
    const agent = await depositFor(meta.pool, meta.providerId, 10_000n);
    const ledger = gatedLedger();
    const hold = holdOf(agent, { baseMicro: 1000n }, ledger.db);
    const covered = await Promise.all(Array.from({ length: 5 }, () => hold.cover(100n)));
    expect(covered).toEqual([true, true, true, true, true]);
    expect(ledger.seen).toEqual(["pgtoll_ledger_reserve"]);
    expect(hold.unspent).toBe(1000n);
    expect(hold.take(1500n)).toBe(1000n);
    hold.giveBack(400n);
    expect(hold.unspent).toBe(400n);
    await hold.release();
    expect(await balanceOf(agent)).toEqual([10_000n, 0n]);
  });

  it("doubles its size at each top-up of its own size up to the maximum, not for a named amount, and starts again after a release", async () => {
    const agent = await depositFor(meta.pool, meta.providerId, 1_000_000n);
    const hold = holdOf(agent, { baseMicro: 100n, maxMicro: 500n });
    const added: bigint[] = [];
    for (let i = 0; i < 4; i++) {
      expect(await hold.cover(1n)).toBe(true);
      added.push(hold.take(1_000_000n));
    }
    expect(added).toEqual([200n, 400n, 500n, 500n]);
    expect(await hold.cover(50n, 0n)).toBe(true);
    expect([hold.unspent, hold.size]).toEqual([50n, 500n]);
    await hold.release();
    expect([hold.unspent, hold.size, hold.reservationId]).toEqual([0n, 100n, null]);
    expect((await balanceOf(agent))[1]).toBe(0n);
  });

  it("takes at most a quarter of the available balance beyond its fair share, so the agent's other holders can spend", async () => {
    const agent = await depositFor(meta.pool, meta.providerId, 10_000n);
    // Its size grows to 8000; beyond its base of 4000, a quarter of the 10 000 available is less.
    const busy = holdOf(agent, { baseMicro: 4000n, maxMicro: 8000n });
    expect(await busy.cover(1n)).toBe(true);
    expect(busy.unspent).toBe(4000n);
    // Beyond what it needs (1), a quarter of the 6000 left.
    const other = holdOf(agent, { baseMicro: 8000n, fairShareAboveMicro: 0n });
    expect(await other.cover(1n)).toBe(true);
    expect(other.unspent).toBe(1500n);
    // What it needs it gets, whatever the quarter.
    const third = holdOf(agent, { baseMicro: 1n, fairShareAboveMicro: 0n });
    expect(await third.cover(4000n, 0n)).toBe(true);
    expect(third.unspent).toBe(4000n);
    await Promise.all([busy.release(), other.release(), third.release()]);
  });

  it("tops up ahead once half of its size is spent, and not again after a top-up ahead got nothing", async () => {
    const agent = await depositFor(meta.pool, meta.providerId, 300n);
    const ledger = gatedLedger();
    const hold = holdOf(agent, { baseMicro: 100n }, ledger.db);
    hold.topUpAhead(true); // nothing is held yet: the first hold is taken when needed
    expect(await hold.cover(1n)).toBe(true);
    hold.take(50n);
    hold.topUpAhead(false); // half of the size is left
    hold.take(1n);
    hold.topUpAhead(false);
    expect(await hold.cover(0n)).toBe(true); // waits for the top-up in flight
    expect(hold.unspent).toBe(149n);
    hold.take(149n);
    hold.topUpAhead(true);
    await hold.cover(0n);
    expect(hold.take(1000n)).toBe(100n);
    hold.topUpAhead(true); // the balance is spent: it gets nothing
    await hold.cover(0n);
    hold.topUpAhead(true);
    await new Promise((resolve) => setTimeout(resolve, 10));
    expect(ledger.seen).toEqual([
      "pgtoll_ledger_reserve",
      "pgtoll_ledger_extend",
      "pgtoll_ledger_extend",
      "pgtoll_ledger_extend",
    ]);
    // A need asks the ledger again, and reports that nothing is available.
    expect(await hold.cover(1n)).toBe(false);
    expect(ledger.seen).toHaveLength(5);
    await hold.release();
    expect((await balanceOf(agent))[1]).toBe(0n);
  });

  it("is released after the charges queued against it are written, its last charge in the same statement", async () => {
    const agent = await depositFor(meta.pool, meta.providerId, 10_000n);
    const ledger = gatedLedger("pgtoll_ledger_charge_batch");
    const hold = holdOf(agent, {}, ledger.db);
    expect(await hold.cover(50n)).toBe(true);
    hold.queue({ costMicro: hold.take(30n), metadata: { n: 1 } });
    const last = hold.take(20n);
    let released = false;
    const release = hold
      .release(() => ({ costMicro: last, metadata: { n: 2 } }))
      .then(() => (released = true));
    // The hold is emptied at once: a need that comes meanwhile takes a hold of its own.
    expect([hold.unspent, hold.reservationId]).toEqual([0n, null]);
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(released).toBe(false);
    expect(ledger.seen).not.toContain("pgtoll_ledger_release_charged");
    ledger.open();
    await release;
    expect(ledger.seen).toEqual([
      "pgtoll_ledger_reserve",
      "pgtoll_ledger_charge_batch",
      "pgtoll_ledger_release_charged",
    ]);
    expect(await queryCharges(agent)).toEqual([-20n, -30n]);
    expect(await balanceOf(agent)).toEqual([10_000n - 50n, 0n]);
  });

  it("leaves a last charge its release could not write to the charge writer (retry), or gives the hold back without it (void)", async () => {
    const failing = watchedLedger(meta.pool, (name) =>
      name === "pgtoll_ledger_release_charged" ? Promise.reject(new Error("the release failed")) : undefined,
    );
    const retried = await depositFor(meta.pool, meta.providerId, 10_000n);
    const kept = holdOf(retried, {}, failing);
    expect(await kept.cover(40n)).toBe(true);
    await kept.release(() => ({ costMicro: kept.take(40n), metadata: {} }), "retry");
    expect(await queryCharges(retried)).toEqual([-40n]);
    // The hold itself is left to expire.
    expect(await reservations(retried)).toBe(1);

    const voided = await depositFor(meta.pool, meta.providerId, 10_000n);
    const given = holdOf(voided, {}, failing);
    expect(await given.cover(40n)).toBe(true);
    await expect(given.release(() => ({ costMicro: given.take(40n), metadata: {} }))).rejects.toThrow(
      "the release failed",
    );
    expect(await queryCharges(voided)).toEqual([]);
    expect(await balanceOf(voided)).toEqual([10_000n, 0n]);
  });

  it("waits, when it falls short, for the agent's releases in flight, and tries once more", async () => {
    const agent = await depositFor(meta.pool, meta.providerId, 1000n);
    const ledger = gatedLedger("pgtoll_ledger_void");
    const first = holdOf(agent, {}, ledger.db);
    expect(await first.cover(1000n, 0n)).toBe(true);
    const releasing = first.release();
    // Without knowing of that release, a top-up falls short.
    expect(await holdOf(agent).cover(600n, 0n)).toBe(false);
    const next = holdOf(agent, {
      reclaimOtherHolds: () => {
        ledger.open();
        return releasing;
      },
    });
    expect(await next.cover(600n, 0n)).toBe(true);
    await next.release();
    expect(await balanceOf(agent)).toEqual([1000n, 0n]);
  });
});
