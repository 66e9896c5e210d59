import type pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { getDailyLimit } from "../../src/billing/daily-limits.js";
import { getBalance, listLedgerEntries } from "../../src/billing/ledger.js";
import { SqlState } from "../../src/db/sql-state.js";
import type { TestDatabase } from "../support/database.js";
import {
  createProviderDatabase,
  registerPricedProvider,
  startTestGateway,
  type TestGateway,
} from "../support/gateway.js";
import {
  connectAgent,
  fundedTestAgent,
  startTestProxy,
  type TestAgent,
  type TestProxy,
} from "../support/proxy.js";
import { waitForCharges } from "../support/real-clients.js";

let gateway: TestGateway;
let proxy: TestProxy;
let providerDb: TestDatabase;
let providerId: string;

/** 1 USDC per 1000 rows: a row costs 1000 micro-USDC. */
const ROW = 1000n;
const FUNDS = 100_000_000n;

beforeAll(async () => {
  gateway = await startTestGateway();
  // A session's first hold is 1000 rows' worth (1 USDC): far above the limits set below.
  proxy = await startTestProxy(gateway);
  providerDb = await createProviderDatabase(300);
  ({ providerId } = await registerPricedProvider(gateway, providerDb.url, {
    basePricePer1000Rows: 1,
    markupMultiplier: 1,
  }));
});
afterAll(async () => {
  await proxy?.close();
  await gateway?.close();
  await providerDb?.drop();
});

async function putLimit(agent: TestAgent, dailyLimit: string) {
  const response = await gateway.app.inject({
    method: "PUT",
    url: `/api/agents/${agent.wallet}/limits/${providerId}`,
    headers: { authorization: `Bearer ${await agent.token()}` },
    payload: { dailyLimit },
  });
  expect(response.statusCode, response.body).toBe(200);
}

/** What the agent's query entries add up to, once every charge of its sessions is written. */
async function charged(agent: TestAgent): Promise<bigint> {
  await waitForCharges(proxy);
  const entries = await listLedgerEntries(gateway.ctx.db, agent.wallet, { providerId, limit: 1000 });
  return entries.filter((e) => e.type === "query").reduce((total, e) => total - e.amountMicro, 0n);
}

describe("a daily limit set while a wire session is open", () => {
  it("binds the session's next statement, though its hold was taken before the limit", async () => {
    const agent = await fundedTestAgent(gateway, providerId, FUNDS);
    const client = await connectAgent(proxy, agent, providerId);
    expect((await client.query("SELECT id FROM items ORDER BY id LIMIT 10")).rowCount).toBe(10);
    await putLimit(agent, "0.03");

    // 0.02 USDC of today's limit is left: 20 rows, then the limit stops the result.
    const failure = await client.query("SELECT id FROM items ORDER BY id").then(
      (result) => new Error(`all ${result.rowCount} rows were delivered past the limit`),
      (error: pg.DatabaseError) => error,
    );
    expect((failure as pg.DatabaseError).code, failure.message).toBe(SqlState.budgetExceeded);
    expect(failure.message).toMatch(/daily limit of 0\.030000 USDC/);
    const delivered = Number(/cut off after (\d+) rows/.exec(failure.message)?.[1] ?? 0);
    expect(delivered).toBeLessThanOrEqual(20);

    // Reached: the next statement is refused before it runs.
    const refused = await client.query("SELECT 1").catch((error: pg.DatabaseError) => error);
    expect((refused as pg.DatabaseError).code).toBe(SqlState.budgetExceeded);
    await client.end();

    const total = await charged(agent);
    expect(total).toBe(ROW * BigInt(10 + delivered));
    expect(total).toBeLessThanOrEqual(30_000n);
    const limit = await getDailyLimit(gateway.ctx.db, agent.wallet, providerId);
    expect(limit.spentTodayMicro).toBe(total);
    expect((await getBalance(gateway.ctx.db, agent.wallet, providerId)).balanceMicro).toBe(FUNDS - total);
  });

  it("lets a raised limit's session go on", async () => {
    const agent = await fundedTestAgent(gateway, providerId, FUNDS);
    await putLimit(agent, "0.01");
    const client = await connectAgent(proxy, agent, providerId);
    expect((await client.query("SELECT id FROM items ORDER BY id LIMIT 10")).rowCount).toBe(10);
    const stopped = await client.query("SELECT 1").catch((error: pg.DatabaseError) => error);
    expect((stopped as pg.DatabaseError).code).toBe(SqlState.budgetExceeded);
    await putLimit(agent, "1");
    expect((await client.query("SELECT id FROM items ORDER BY id LIMIT 100")).rowCount).toBe(100);
    await client.end();
    expect(await charged(agent)).toBe(110n * ROW);
  });
});

/** `POST /api/query` of the agent; its status and, answered, its cost. */
async function restQuery(agent: TestAgent, sql: string) {
  const response = await gateway.app.inject({
    method: "POST",
    url: "/api/query",
    payload: { sql, agentWallet: agent.wallet, providerId },
  });
  return { status: response.statusCode, body: response.json() as { actualCost?: string; error?: string } };
}

describe("a daily limit lowered while an agent's REST request runs", () => {
  it("binds the running request at its next row and refuses with 422 the requests after it", async () => {
    const agent = await fundedTestAgent(gateway, providerId, FUNDS);
    const quick = "SELECT id FROM items ORDER BY id LIMIT 5";
    const before = await Promise.all([
      restQuery(agent, quick),
      restQuery(agent, quick),
      restQuery(agent, quick),
    ]);
    expect(before.map((answer) => answer.status)).toEqual([200, 200, 200]);
    // A request that holds the agent's funds through the change, its one row coming after it.
    const slow = restQuery(agent, "SELECT pg_sleep(1.5), 1 AS one");
    await new Promise((resolve) => setTimeout(resolve, 300));
    await putLimit(agent, "0.01");
    const after: number[] = [];
    for (let i = 0; i < 5; i++) after.push((await restQuery(agent, quick)).status);
    expect(after).toEqual([422, 422, 422, 422, 422]);
    const slowAnswer = await slow;
    expect(slowAnswer.status, JSON.stringify(slowAnswer.body)).toBe(422);
    expect(slowAnswer.body.error).toMatch(/daily limit of 0\.010000 USDC/);
    await waitForCharges(proxy);
    // The three quick requests begun before the change: nothing after it.
    const limit = await getDailyLimit(gateway.ctx.db, agent.wallet, providerId);
    expect(limit.spentTodayMicro).toBe(15n * ROW);
  });
});
