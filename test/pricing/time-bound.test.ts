import type { Socket } from "node:net";
import { performance } from "node:perf_hooks";
import pg from "pg";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { setDailyLimit } from "../../src/billing/daily-limits.js";
import { creditDeposit, getBalance, listLedgerEntries } from "../../src/billing/ledger.js";
import { SqlState } from "../../src/db/sql-state.js";
import type { TestDatabase } from "../support/database.js";
import { randomTxHash, randomWallet } from "../support/fixtures.js";
import {
  createProviderDatabase,
  registerPricedProvider,
  startTestGateway,
  type TestGateway,
} from "../support/gateway.js";
import { connectAgent, fundedTestAgent, startTestProxy, type TestProxy } from "../support/proxy.js";
import { waitForCharges } from "../support/real-clients.js";

/**
 * Statement time priced at 1 USDC per second, rows and bytes nearly free: what an agent's funds, its budgets and
 * the statement timeout allow is a matter of milliseconds, and each one must be paid for.
 */
const TIMEOUT_MS = 3000;
let gateway: TestGateway;
let proxy: TestProxy;
let providerDb: TestDatabase;
let timedProviderId: string;
let rowsProviderId: string;

beforeAll(async () => {
  gateway = await startTestGateway({ env: { PGTOLL_STATEMENT_TIMEOUT_MS: String(TIMEOUT_MS) } });
  proxy = await startTestProxy(gateway, { statementTimeoutMs: TIMEOUT_MS });
  providerDb = await createProviderDatabase(50);
  ({ providerId: timedProviderId } = await registerPricedProvider(gateway, providerDb.url, {
    basePricePer1000Rows: 0.000001,
    markupMultiplier: 1,
    pricePerSecond: 1,
  }));
  ({ providerId: rowsProviderId } = await registerPricedProvider(gateway, providerDb.url, {
    basePricePer1000Rows: 0.001,
    markupMultiplier: 1,
  }));
});
afterAll(async () => {
  await proxy?.close();
  await gateway?.close();
  await providerDb?.drop();
});

/** What the agent's query entries add up to, once its sessions' charges are written. */
async function charged(wallet: string, providerId = timedProviderId): Promise<bigint> {
  await waitForCharges(proxy);
  const entries = await listLedgerEntries(gateway.ctx.db, wallet, { providerId, limit: 1000 });
  return entries.filter((e) => e.type === "query").reduce((total, e) => total - e.amountMicro, 0n);
}

/** Runs `sql`; its error (or null) and how long it took. */
async function timed(
  client: pg.Client,
  sql: string,
): Promise<{ error: pg.DatabaseError | null; ms: number }> {
  const started = performance.now();
  const error = await client.query(sql).then(
    () => null,
    (e: pg.DatabaseError) => e,
  );
  return { error, ms: performance.now() - started };
}

const micro = (usdc: number) => BigInt(Math.round(usdc * 1_000_000));

/** Sessions a test opened: ended after it whatever it asserted, so a failure does not hold up the next test. */
const opened: pg.Client[] = [];
afterEach(async () => {
  for (const client of opened.splice(0))
    if (!(client as unknown as { _ending: boolean })._ending) await client.end().catch(() => {});
});

async function session(agent: Parameters<typeof connectAgent>[1], providerId = timedProviderId) {
  const client = await connectAgent(proxy, agent, providerId);
  opened.push(client);
  return client;
}

describe("statement time on the wire", () => {
  it("is the database's time: a slow reader pays for the time its statement held the backend", async () => {
    const agent = await fundedTestAgent(gateway, timedProviderId, 100_000_000n);
    const client = await session(agent);
    const socket = (client as unknown as { connection: { stream: Socket } }).connection.stream;
    const result = client.query("SELECT repeat('x', 1000) FROM generate_series(1, 30000)");
    // The client reads nothing for 1.5 s: the proxy holds the upstream, whose backend waits to send.
    socket.pause();
    await new Promise((resolve) => setTimeout(resolve, 1500));
    socket.resume();
    expect((await result).rowCount).toBe(30_000);
    await client.end();
    const cost = await charged(agent.wallet);
    // Socket buffers take some of the result while the client reads nothing: most of the pause is held.
    expect(cost, `charged ${cost}`).toBeGreaterThanOrEqual(micro(1.1));
    expect(cost).toBeLessThan(micro(3));
  });

  it("stops a statement past the balance near what the balance buys, PT402, charged that", async () => {
    const agent = await fundedTestAgent(gateway, timedProviderId, 500_000n);
    const client = await session(agent);
    const { error, ms } = await timed(client, "SELECT pg_sleep(1.8)");
    expect(error?.code).toBe(SqlState.insufficientFunds);
    expect(ms, `stopped after ${ms} ms`).toBeLessThan(1400);
    await client.end();
    const cost = await charged(agent.wallet);
    expect(cost, `charged ${cost}`).toBeGreaterThanOrEqual(micro(0.4));
    expect(cost).toBeLessThanOrEqual(micro(0.5));
  });

  it("stops a statement whose large row is passing through only after the row's last byte: the client reads a whole row, then PT402", async () => {
    const agent = await fundedTestAgent(gateway, timedProviderId, 500_000n);
    const client = await session(agent);
    const socket = (client as unknown as { connection: { stream: Socket } }).connection.stream;
    // Rows of 12 MB pass through as they arrive; the client reads nothing past the balance's 0.5 s.
    const result = client.query("SELECT repeat('x', 12000000) AS v FROM generate_series(1, 8)").then(
      () => null,
      (e: pg.DatabaseError) => e,
    );
    socket.pause();
    await new Promise((resolve) => setTimeout(resolve, 1500));
    // The client still reads nothing, yet the statement stopped paying at 0.5 s: the backend is not held for it.
    const backend = new pg.Client({ connectionString: providerDb.url });
    await backend.connect();
    const running = await backend.query(
      "SELECT count(*)::int AS n FROM pg_stat_activity WHERE state = 'active' AND query LIKE 'SELECT repeat(''x'', 12000000)%'",
    );
    await backend.end();
    socket.resume();
    const error = await result;
    expect(running.rows[0].n).toBe(0);
    // A message broken in the middle would fail the client's parser instead (or hang it).
    expect(error?.code).toBe(SqlState.insufficientFunds);
    await client.end();
    const cost = await charged(agent.wallet);
    expect(cost).toBeLessThanOrEqual(micro(0.5));
  });

  it("stops a long count past the balance the same way", async () => {
    const agent = await fundedTestAgent(gateway, timedProviderId, 300_000n);
    const client = await session(agent);
    const { error, ms } = await timed(client, "SELECT count(*) FROM generate_series(1, 2e9)");
    expect(error?.code).toBe(SqlState.insufficientFunds);
    expect(ms, `stopped after ${ms} ms`).toBeLessThan(1400);
    await client.end();
    const cost = await charged(agent.wallet);
    expect(cost, `charged ${cost}`).toBeGreaterThanOrEqual(micro(0.2));
    expect(cost).toBeLessThanOrEqual(micro(0.3));
  });

  it("stops at the agent's daily limit with the budget SQLSTATE", async () => {
    const agent = await fundedTestAgent(gateway, timedProviderId, 100_000_000n);
    await setDailyLimit(gateway.ctx.db, agent.wallet, timedProviderId, 400_000n);
    const client = await session(agent);
    const { error, ms } = await timed(client, "SELECT pg_sleep(1.8)");
    expect(error?.code).toBe(SqlState.budgetExceeded);
    expect(error?.message).toMatch(/daily limit/);
    expect(ms, `stopped after ${ms} ms`).toBeLessThan(1400);
    await client.end();
    const cost = await charged(agent.wallet);
    expect(cost, `charged ${cost}`).toBeGreaterThanOrEqual(micro(0.3));
    expect(cost).toBeLessThanOrEqual(micro(0.4));
  });

  it("never buys uncharged time with a session budget raised step by step", async () => {
    const agent = await fundedTestAgent(gateway, timedProviderId, 100_000_000n);
    const client = await session(agent);
    let wall = 0;
    for (let step = 1; step <= 5; step++) {
      const spent = Number((await client.query("SHOW pgtoll.session_cost")).rows[0]["pgtoll.session_cost"]);
      await client.query(`SET pgtoll.max_session_cost = '${(spent + 0.05).toFixed(6)}'`);
      const { error, ms } = await timed(client, "SELECT pg_sleep(1)");
      expect(error?.code, `step ${step}: ${error?.message}`).toBe(SqlState.budgetExceeded);
      expect(error?.message).toMatch(/pgtoll\.max_session_cost/);
      expect(ms, `step ${step} ran ${ms} ms`).toBeLessThan(700);
      wall += ms;
    }
    await client.end();
    const cost = await charged(agent.wallet);
    expect(cost).toBeLessThanOrEqual(micro(0.25));
    expect(cost, `charged ${cost} for ${wall} ms`).toBeGreaterThanOrEqual(micro(0.2));
  });

  it("charges a statement stopped by the statement timeout its time", async () => {
    const agent = await fundedTestAgent(gateway, timedProviderId, 100_000_000n);
    const client = await session(agent);
    const { error } = await timed(client, "SELECT pg_sleep(5)");
    expect(error?.code).toBe(SqlState.queryCanceled);
    await client.end();
    const cost = await charged(agent.wallet);
    expect(cost, `charged ${cost}`).toBeGreaterThanOrEqual(micro((TIMEOUT_MS - 50) / 1000));
  });

  it("keeps the statement timeout alone for a provider without a time price", async () => {
    const agent = await fundedTestAgent(gateway, rowsProviderId, 1_000n);
    const client = await session(agent, rowsProviderId);
    const { error, ms } = await timed(client, "SELECT pg_sleep(5)");
    expect(error?.code).toBe(SqlState.queryCanceled);
    expect(ms).toBeGreaterThanOrEqual(TIMEOUT_MS - 50);
    await client.end();
  });
});

/** `POST /api/query` for `agent`; the answer and how long it took. */
async function restQuery(
  agent: string,
  sql: string,
  extra: Record<string, unknown> = {},
  providerId = timedProviderId,
) {
  const started = performance.now();
  const res = await gateway.app.inject({
    method: "POST",
    url: "/api/query",
    payload: { sql, agentWallet: agent, providerId, ...extra },
  });
  return { res, ms: performance.now() - started };
}

async function restAgent(amountMicro: bigint, providerId = timedProviderId): Promise<string> {
  const agent = randomWallet();
  await creditDeposit(gateway.ctx.db, {
    chainId: 8453,
    txHash: randomTxHash(),
    agentWallet: agent,
    providerId,
    amountMicro,
    blockNumber: 1n,
  });
  return agent;
}

/** The agent's query entries with the timed provider: one per request. */
async function restCharges(agent: string): Promise<bigint[]> {
  const entries = await listLedgerEntries(gateway.ctx.db, agent, { providerId: timedProviderId, limit: 100 });
  return entries.filter((e) => e.type === "query").map((e) => -e.amountMicro);
}

describe("statement time on POST /api/query", () => {
  beforeAll(async () => {
    // The provider's pool connects on its first request: not part of any statement's time below.
    const { res } = await restQuery(await restAgent(1_000_000n), "SELECT 1");
    expect(res.statusCode, res.body).toBe(200);
  });

  it("stops a statement past the balance near what the balance buys, 402, charged that", async () => {
    const agent = await restAgent(500_000n);
    const { res, ms } = await restQuery(agent, "SELECT pg_sleep(1.8)");
    expect(res.statusCode, res.body).toBe(402);
    expect(res.json().error).toMatch(/stopped after \d+ ms/);
    expect(ms, `answered after ${ms} ms`).toBeLessThan(1400);
    const charges = await restCharges(agent);
    expect(charges).toHaveLength(1);
    expect(charges[0]!, `charged ${charges[0]}`).toBeGreaterThanOrEqual(micro(0.4));
    expect(charges[0]!).toBeLessThanOrEqual(micro(0.5));
    expect(await getBalance(gateway.ctx.db, agent, timedProviderId)).toMatchObject({ reservedMicro: 0n });
  });

  it("stops a statement at its maxCost with 422 budget_exceeded, charged at most maxCost", async () => {
    const agent = await restAgent(100_000_000n);
    const { res, ms } = await restQuery(agent, "SELECT pg_sleep(1.8)", { maxCost: "0.2" });
    expect(res.statusCode, res.body).toBe(422);
    expect(res.json().code).toBe("budget_exceeded");
    expect(ms, `answered after ${ms} ms`).toBeLessThan(1200);
    const charges = await restCharges(agent);
    expect(charges).toHaveLength(1);
    expect(charges[0]!, `charged ${charges[0]}`).toBeGreaterThanOrEqual(micro(0.15));
    expect(charges[0]!).toBeLessThanOrEqual(micro(0.2));
  });

  it("stops a statement at the agent's daily limit with 422", async () => {
    const agent = await restAgent(100_000_000n);
    await setDailyLimit(gateway.ctx.db, agent, timedProviderId, 300_000n);
    const { res, ms } = await restQuery(agent, "SELECT pg_sleep(1.8)");
    expect(res.statusCode, res.body).toBe(422);
    expect(res.json().error).toMatch(/daily limit/);
    expect(ms, `answered after ${ms} ms`).toBeLessThan(1400);
    const charges = await restCharges(agent);
    expect(charges[0]!, `charged ${charges[0]}`).toBeGreaterThanOrEqual(micro(0.2));
    expect(charges[0]!).toBeLessThanOrEqual(micro(0.3));
  });

  it("bounds the statements of one request together: what the funds pay for in all", async () => {
    const sql = "SELECT pg_sleep(0.7); SELECT pg_sleep(0.7)";
    const rich = await restAgent(100_000_000n);
    const whole = await restQuery(rich, sql);
    expect(whole.res.statusCode, whole.res.body).toBe(200);
    // Past the proxy's window bound (1 USDC here) one query is written in more than one entry.
    const richCharges = await restCharges(rich);
    expect(richCharges.reduce((sum, charge) => sum + charge, 0n)).toBeGreaterThanOrEqual(micro(1.4));
    const poor = await restAgent(300_000n);
    const { res, ms } = await restQuery(poor, sql);
    expect(res.statusCode, res.body).toBe(402);
    expect(ms, `answered after ${ms} ms`).toBeLessThan(1100);
    const charges = await restCharges(poor);
    expect(charges).toHaveLength(1);
    expect(charges[0]!, `charged ${charges[0]}`).toBeGreaterThanOrEqual(micro(0.25));
    expect(charges[0]!).toBeLessThanOrEqual(micro(0.3));
  });

  it("charges a statement stopped by the statement timeout its time", async () => {
    const agent = await restAgent(100_000_000n);
    const { res } = await restQuery(agent, "SELECT pg_sleep(5)");
    expect(res.statusCode, res.body).toBe(500);
    expect(res.json().error).toMatch(/statement timeout/);
    const charges = await restCharges(agent);
    expect(charges).toHaveLength(1);
    expect(charges[0]!, `charged ${charges[0]}`).toBeGreaterThanOrEqual(micro((TIMEOUT_MS - 50) / 1000));
  });

  it("keeps the statement timeout alone for a provider without a time price", async () => {
    const agent = await restAgent(1_000n, rowsProviderId);
    const { res, ms } = await restQuery(agent, "SELECT pg_sleep(5)", {}, rowsProviderId);
    expect(res.statusCode, res.body).toBe(500);
    expect(ms).toBeGreaterThanOrEqual(TIMEOUT_MS - 50);
  });
});
