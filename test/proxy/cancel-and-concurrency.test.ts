import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { costOfRows } from "../../src/billing/cost.js";
import { getBalance, listLedgerEntries } from "../../src/billing/ledger.js";
import { sendCancelRequest } from "../../src/providers/cancel-request.js";
import { UpstreamSlots } from "../../src/proxy/upstream-slots.js";
import type { TestDatabase } from "../support/database.js";
import {
  createProviderDatabase,
  registerPricedProvider,
  startTestGateway,
  type TestGateway,
} from "../support/gateway.js";
import { fundedTestAgent, startTestProxy, type TestAgent, type TestProxy } from "../support/proxy.js";
import {
  expectChargedPerStatement,
  ODD_PRICE,
  ODD_PRICING,
  waitFor,
  waitForCharges,
} from "../support/real-clients.js";

let gateway: TestGateway;
let providerDb: TestDatabase;
let providerId: string;
const FUNDS = 1_000_000n;
let proxy: TestProxy;

beforeAll(async () => {
  gateway = await startTestGateway();
  providerDb = await createProviderDatabase(20);
  ({ providerId } = await registerPricedProvider(gateway, providerDb.url, ODD_PRICING));
  proxy = await startTestProxy(gateway);
});
afterAll(async () => {
  await proxy?.close();
  await gateway?.close();
  await providerDb?.drop();
});

/** Upstream slots that remember how many were ever in use at once and how many sessions had to queue. */
class WatchedSlots extends UpstreamSlots {
  mostInUse = 0;
  queued = 0;

  constructor(
    readonly cap: number,
    waitTimeoutMs: number,
  ) {
    super(cap, waitTimeoutMs);
  }

  override async acquire(providerId: string): Promise<() => void> {
    if (this.inUse(providerId) >= this.cap) this.queued++;
    const release = await super.acquire(providerId);
    this.mostInUse = Math.max(this.mostInUse, this.inUse(providerId));
    return release;
  }
}

/** Sessions take their upstream slot from the context when they start: each test sets its own limits. */
function useSlots(limit: number, waitTimeoutMs: number): UpstreamSlots {
  proxy.ctx.slots = new UpstreamSlots(limit, waitTimeoutMs);
  return proxy.ctx.slots;
}

async function connect(agent: TestAgent): Promise<pg.Client> {
  const client = new pg.Client({
    host: "127.0.0.1",
    port: proxy.port,
    user: agent.wallet,
    database: providerId,
    password: await agent.token(),
  });
  client.on("error", () => {});
  await client.connect();
  return client;
}

/** What node-postgres keeps of the server's BackendKeyData and its cancel method, which @types/pg leaves out. */
type CancellableClient = pg.Client & {
  processID: number;
  secretKey: number;
  cancel(client: pg.Client, query: pg.Query): void;
};
const keyOf = (client: pg.Client) => client as CancellableClient;

/** Upstream sessions of the provider database running `pg_sleep`, seen directly. */
async function sleepingUpstream(direct: pg.Client): Promise<{ pid: number; query: string }[]> {
  const { rows } = await direct.query(
    "SELECT pid, query FROM pg_stat_activity WHERE datname = current_database() AND state = 'active' AND query LIKE 'SELECT pg_sleep%'",
  );
  return rows;
}

describe("cancel through the proxy", () => {
  it("reaches the right upstream query (57014) and not another session's; a wrong key cancels nothing", async () => {
    useSlots(10, 5_000);
    const [agentA, agentB] = await Promise.all([
      fundedTestAgent(gateway, providerId, FUNDS),
      fundedTestAgent(gateway, providerId, FUNDS),
    ]);
    const [a, b] = await Promise.all([connect(agentA), connect(agentB)]);
    const direct = new pg.Client({ connectionString: providerDb.url });
    await direct.connect();
    try {
      const sleepA = new pg.Query("SELECT pg_sleep(20) AS a");
      const outcomeA = new Promise<unknown>((resolve) => {
        sleepA.on("error", resolve);
        sleepA.on("end", () => resolve(null));
      });
      a.query(sleepA);
      const sleepB = b.query("SELECT pg_sleep(1.2) AS b, 'b' AS who");
      await waitFor(
        async () => (await sleepingUpstream(direct)).length === 2,
        5_000,
        "both sleeps to run upstream",
      );

      // BackendKeyData carries each session's upstream backend pid (its secret is the proxy's own).
      const upstreamPids = (await sleepingUpstream(direct)).map((r) => r.pid);
      expect(upstreamPids.sort()).toEqual([keyOf(a).processID, keyOf(b).processID].sort());

      // A CancelRequest with A's process id and a wrong secret does nothing.
      await sendCancelRequest(
        "127.0.0.1",
        proxy.port,
        keyOf(a).processID,
        (keyOf(a).secretKey ^ 0x5a5a5a5a) | 0,
      );
      await new Promise((r) => setTimeout(r, 200));
      expect((await sleepingUpstream(direct)).map((r) => r.query).sort()).toEqual([
        "SELECT pg_sleep(1.2) AS b, 'b' AS who",
        "SELECT pg_sleep(20) AS a",
      ]);

      // pg's own cancel: a second connection sends A's key.
      const started = Date.now();
      keyOf(new pg.Client({ host: "127.0.0.1", port: proxy.port })).cancel(a, sleepA);
      expect(await outcomeA).toMatchObject({
        code: "57014",
        message: "canceling statement due to user request",
      });
      expect(Date.now() - started).toBeLessThan(2_000);
      expect((await sleepingUpstream(direct)).map((r) => r.query)).toEqual([
        "SELECT pg_sleep(1.2) AS b, 'b' AS who",
      ]);
      expect((await sleepB).rows).toEqual([{ b: "", who: "b" }]);

      expect((await a.query("SELECT 'a' AS who, pg_backend_pid() AS pid")).rows).toEqual([
        { who: "a", pid: keyOf(a).processID },
      ]);
      expect((await b.query("SELECT 'b again' AS who")).rows).toEqual([{ who: "b again" }]);
    } finally {
      await direct.end();
      await Promise.all([a.end(), b.end()]);
    }
    await waitForCharges(proxy);
    await expectChargedPerStatement(gateway, agentA, providerId, FUNDS, [
      // The cancel's error is the database's text: charged as a row.
      { rows: 1, sql: "SELECT pg_sleep(20) AS a" },
      { rows: 1, sql: "SELECT 'a' AS who, pg_backend_pid() AS pid" },
    ]);
    await expectChargedPerStatement(gateway, agentB, providerId, FUNDS, [
      { rows: 1, sql: "SELECT pg_sleep(1.2) AS b, 'b' AS who" },
      { rows: 1, sql: "SELECT 'b again' AS who" },
    ]);
  });
});

describe("many agent sessions at once", () => {
  it("serves 200 concurrent sessions through 20 upstream slots, each with the right, rightly charged answer", async () => {
    const limit = 20;
    const sessions = 200;
    const slots = new WatchedSlots(limit, 20_000);
    proxy.ctx.slots = slots;
    const agents = await Promise.all(
      Array.from({ length: sessions }, () => fundedTestAgent(gateway, providerId, FUNDS)),
    );
    const tokens = await Promise.all(agents.map((agent) => agent.token()));

    // The first `limit` sessions hold their slots until as many more queue behind them.
    const crowd = waitFor(() => slots.queued >= limit, 15_000, "sessions to queue for a slot");
    const answers = await Promise.all(
      agents.map(async (agent, i) => {
        const client = new pg.Client({
          host: "127.0.0.1",
          port: proxy.port,
          user: agent.wallet,
          database: providerId,
          password: tokens[i],
        });
        await client.connect();
        try {
          await crowd;
          // The two ids of `items` (1..20) ending in the agent's last digit (10 and 20 for 0).
          const digit = i % 10;
          const result = await client.query<{ id: number; agent: number }>(
            "SELECT id, $1::int AS agent FROM items WHERE id % 10 = $2 ORDER BY id",
            [i, digit],
          );
          return { i, rows: result.rows };
        } finally {
          await client.end();
        }
      }),
    );
    for (const { i, rows } of answers) {
      const digit = i % 10;
      const ids = [digit, digit + 10, digit + 20].filter((id) => id >= 1 && id <= 20);
      expect(rows).toEqual(ids.map((id) => ({ id, agent: i })));
    }
    expect(slots.mostInUse).toBe(limit);
    expect(slots.queued).toBeGreaterThanOrEqual(limit);
    expect(slots.inUse(providerId)).toBe(0);

    await waitForCharges(proxy);
    // One query entry per agent, for exactly its rows; nothing left reserved.
    const { rows } = await gateway.ctx.db.query<{
      agent_wallet: string;
      balance_micro: bigint;
      reserved_micro: bigint;
    }>(
      "SELECT agent_wallet, balance_micro, reserved_micro FROM balances WHERE provider_id = $1 AND agent_wallet = ANY($2)",
      [providerId, agents.map((a) => a.wallet)],
    );
    const byWallet = new Map(rows.map((r) => [r.agent_wallet, r]));
    for (const [i, agent] of agents.entries()) {
      const rowCount = answers[i]!.rows.length;
      expect(byWallet.get(agent.wallet)).toMatchObject({
        balance_micro: FUNDS - costOfRows(rowCount, ODD_PRICE),
        reserved_micro: 0n,
      });
    }
    const sample = agents[7]!;
    const entries = await listLedgerEntries(gateway.ctx.db, sample.wallet, { providerId, limit: 10 });
    expect(entries.map((e) => [e.type, e.metadata.rowCount ?? null, e.amountMicro])).toEqual([
      ["query", 2, -costOfRows(2, ODD_PRICE)],
      ["deposit", null, FUNDS],
    ]);
  });

  it("refuses a session that waited longer than the queue timeout with 53300, and serves the next once a slot is free", async () => {
    const slots = useSlots(1, 300);
    const [first, second, third] = await Promise.all(
      [0, 1, 2].map(() => fundedTestAgent(gateway, providerId, FUNDS)),
    );
    const holder = await connect(first!);
    const started = Date.now();
    const refused = await connect(second!).then(
      () => null,
      (e: unknown) => e,
    );
    expect(refused).toMatchObject({
      code: "53300",
      severity: "FATAL",
      message: expect.stringMatching(/upstream sessions .* busy; waited 300 ms/),
    });
    expect(Date.now() - started).toBeGreaterThanOrEqual(290);
    expect((await holder.query("SELECT 1 AS still")).rows).toEqual([{ still: 1 }]);

    // A session that waits less than the timeout gets the slot when it is freed.
    const waiting = connect(third!);
    await waitFor(() => slots.waiting(providerId) === 1, 2_000, "the third session to queue");
    await holder.end();
    const late = await waiting;
    expect((await late.query("SELECT 'late' AS who")).rows).toEqual([{ who: "late" }]);
    await late.end();
    await waitForCharges(proxy);
    expect(await getBalance(gateway.ctx.db, second!.wallet, providerId)).toMatchObject({
      balanceMicro: FUNDS,
      reservedMicro: 0n,
    });
    await expectChargedPerStatement(gateway, first!, providerId, FUNDS, [{ rows: 1 }]);
    await expectChargedPerStatement(gateway, third!, providerId, FUNDS, [
      { rows: 1, sql: "SELECT 'late' AS who" },
    ]);
  });
});
