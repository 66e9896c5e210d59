import pg from "pg";
import { afterEach, describe, expect, it } from "vitest";
import { randomTxHash, randomWallet, useLedgerDatabase } from "../../test/support/fixtures.js";
import { AgentHold } from "./agent-hold.js";
import { ChargeWriter } from "./charge-writer.js";
import { DailyLimitWatch } from "./daily-limit-watch.js";
import { clearDailyLimit, setDailyLimit } from "./daily-limits.js";
import { creditDeposit, getBalance } from "./ledger.js";

const meta = useLedgerDatabase();
const watches: DailyLimitWatch[] = [];

afterEach(async () => {
  await Promise.all(watches.splice(0).map((watch) => watch.close()));
});

async function startWatch(): Promise<DailyLimitWatch> {
  const watch = new DailyLimitWatch({ connectionString: meta.db.url, retryMs: 50 });
  watches.push(watch);
  await watch.start();
  return watch;
}

async function fundedHold(watch: DailyLimitWatch, amountMicro: bigint) {
  const agent = randomWallet();
  await creditDeposit(meta.pool, {
    chainId: 8453,
    txHash: randomTxHash(),
    agentWallet: agent,
    providerId: meta.providerId,
    amountMicro,
    blockNumber: 1n,
  });
  const writer = new ChargeWriter(meta.pool, { ttlSeconds: 60 });
  const hold = new AgentHold(meta.pool, writer, agent, meta.providerId, {
    ttlSeconds: 60,
    baseMicro: 50_000n,
    limits: watch,
  });
  return { agent, hold };
}

const reservedOf = async (agent: string) =>
  (await getBalance(meta.pool, agent, meta.providerId)).reservedMicro;

async function until(check: () => Promise<boolean> | boolean, what: string): Promise<void> {
  const deadline = Date.now() + 5000;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

describe("DailyLimitWatch", () => {
  it("tells an open hold of a limit set on another connection: it gives back what it held and holds within it", async () => {
    const watch = await startWatch();
    const { agent, hold } = await fundedHold(watch, 1_000_000n);
    expect(await hold.cover(1000n)).toBe(true);
    expect(hold.unspent).toBe(50_000n);
    expect(hold.take(1000n)).toBe(1000n);

    // Another process's statement: a connection of its own, not the watch's pool.
    const other = new pg.Client({ connectionString: meta.db.url });
    await other.connect();
    await setDailyLimit(other, agent, meta.providerId, 5000n);
    await other.end();

    await until(() => hold.unspent === 0n, "the hold to be told");
    // What was taken (1000) stays held for its charge; the rest went back to the agent.
    await until(async () => (await reservedOf(agent)) === 1000n, "the unspent part to be given back");
    // Today's remainder less what is held: 4000 more, no more.
    expect(await hold.cover(4000n)).toBe(true);
    expect(hold.unspent).toBe(4000n);
    expect(await hold.cover(4001n)).toBe(false);
    await hold.release();
    expect(await reservedOf(agent)).toBe(0n);
  });

  it("tells the holds when a limit is cleared, and not the holds of other agents", async () => {
    const watch = await startWatch();
    const first = await fundedHold(watch, 1_000_000n);
    const second = await fundedHold(watch, 1_000_000n);
    await setDailyLimit(meta.pool, first.agent, meta.providerId, 900_000n);
    expect(await first.hold.cover(1n)).toBe(true);
    expect(await second.hold.cover(1n)).toBe(true);
    expect(await clearDailyLimit(meta.pool, first.agent, meta.providerId)).toBe(true);
    await until(() => first.hold.unspent === 0n, "the first hold to be told");
    expect(second.hold.unspent).toBe(50_000n);
    await first.hold.release();
    await second.hold.release();
  });

  it("after its connection was lost, tells every hold once it listens again", async () => {
    const watch = await startWatch();
    const { agent, hold } = await fundedHold(watch, 1_000_000n);
    expect(await hold.cover(1n)).toBe(true);
    const { rows } = await meta.pool.query<{ n: number }>(
      `SELECT count(pg_terminate_backend(pid))::int AS n FROM pg_stat_activity
        WHERE datname = current_database() AND query = 'LISTEN pgtoll_daily_limit'`,
    );
    expect(rows[0]!.n).toBe(1);
    // A change whose notification was missed (set here without one): the reconnection makes up for it.
    await meta.pool.query(
      "UPDATE balances SET daily_limit_micro = 2000 WHERE agent_wallet = $1 AND provider_id = $2",
      [agent, meta.providerId],
    );
    await until(() => hold.unspent === 0n, "the hold to be told after the reconnection");
    await until(async () => (await reservedOf(agent)) === 0n, "the hold to be given back");
    expect(await hold.cover(2001n)).toBe(false);
    expect(await hold.cover(2000n)).toBe(true);
    await hold.release();
  });
});
