import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { setDailyLimit } from "../../src/billing/daily-limits.js";
import { creditDeposit, getBalance, listLedgerEntries } from "../../src/billing/ledger.js";
import { formatMicro } from "../../src/billing/money.js";
import type { TestDatabase } from "../support/database.js";
import { dataRowBytes, expectedCostMicro, type TestPrices } from "../support/expected-cost.js";
import { randomTxHash, randomWallet } from "../support/fixtures.js";
import {
  createProviderDatabase,
  registerPricedProvider,
  startTestGateway,
  type TestGateway,
} from "../support/gateway.js";

let gateway: TestGateway;
let providerDb: TestDatabase;
let providerId: string;

/** 1 USDC per 1000 rows, markup 1.5, minimum 0.0005, 2 USDC per MB, 0.01 per second; orders 5 per 1000 rows. */
const prices: TestPrices = {
  basePerThousandRowsMicro: 1_000_000n,
  markupPpm: 1_500_000n,
  minimumMicro: 500n,
  perMBMicro: 2_000_000n,
  perSecondMicro: 10_000n,
};
const ordersPrices: TestPrices = { ...prices, basePerThousandRowsMicro: 5_000_000n };

beforeAll(async () => {
  gateway = await startTestGateway({ env: { PGTOLL_ROW_CAP: "1000" } });
  providerDb = await createProviderDatabase(300);
  ({ providerId } = await registerPricedProvider(gateway, providerDb.url, {
    basePricePer1000Rows: 1,
    markupMultiplier: 1.5,
    minimumCostPerStatement: 0.0005,
    pricePerMB: 2,
    pricePerSecond: 0.01,
    tablePrices: { orders: 5 },
  }));
});
afterAll(async () => {
  await gateway?.close();
  await providerDb?.drop();
});

async function fundedAgent(amountMicro: bigint): Promise<string> {
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

function query(agentWallet: string, sql: string, extra: Record<string, unknown> = {}) {
  return gateway.app.inject({
    method: "POST",
    url: "/api/query",
    payload: { sql, agentWallet, providerId, ...extra },
  });
}

const sum = (values: number[]) => values.reduce((a, b) => a + b, 0);

describe("POST /api/query priced beyond rows", () => {
  it("charges rows, result bytes and time by the rule, and says how", async () => {
    const agent = await fundedAgent(10_000_000n);
    const sql = "SELECT id, name, created_at FROM items ORDER BY id LIMIT 200";
    const res = await query(agent, sql);
    expect(res.statusCode, res.body).toBe(200);
    const body = res.json();
    const bytes = sum(await dataRowBytes(providerDb.url, sql));
    expect(body.costBreakdown).toMatchObject({ rows: 200, bytes, minimumApplied: false });
    const ms = body.costBreakdown.milliseconds;
    expect(ms).toBeGreaterThanOrEqual(0);
    expect(ms).toBeLessThan(Number.parseFloat(body.executionTime) + 1);
    const expected = expectedCostMicro(prices, { rows: 200, bytes, ms });
    expect(body.actualCost).toBe(formatMicro(expected));
    expect(body.costBreakdown.bytesCost).toBe(
      formatMicro(
        expectedCostMicro(
          { ...prices, basePerThousandRowsMicro: 0n, minimumMicro: 0n, perSecondMicro: 0n },
          { rows: 0, bytes },
        ),
      ),
    );
    const [entry] = await listLedgerEntries(gateway.ctx.db, agent, { providerId, limit: 1 });
    expect(entry).toMatchObject({ amountMicro: -expected, metadata: { rowCount: 200, bytes } });
  });

  it("charges the minimum for a statement that costs less", async () => {
    const agent = await fundedAgent(10_000_000n);
    const res = await query(agent, "SELECT 1 WHERE false");
    expect(res.json()).toMatchObject({ actualCost: "0.000500", costBreakdown: { minimumApplied: true } });
    expect((await getBalance(gateway.ctx.db, agent, providerId)).balanceMicro).toBe(10_000_000n - 500n);
  });

  it("charges time measured on the database", async () => {
    const agent = await fundedAgent(10_000_000n);
    const res = await query(agent, "SELECT pg_sleep(0.3)");
    const body = res.json();
    // Measured by pgtoll: the server starts the statement as soon as it has sent the step before it (the
    // estimate), which pgtoll reads a little later on a loaded machine. The measure errs to the agent's side.
    expect(body.costBreakdown.milliseconds).toBeGreaterThanOrEqual(280);
    expect(body.actualCost).toBe(
      formatMicro(
        expectedCostMicro(prices, {
          rows: 1,
          bytes: body.costBreakdown.bytes,
          ms: body.costBreakdown.milliseconds,
        }),
      ),
    );
    expect(body.costBreakdown.timeCost).not.toBe("0.000000");
  });

  it("charges the rows of a priced table at its price", async () => {
    const agent = await fundedAgent(10_000_000n);
    const sql = "SELECT o.id FROM orders o JOIN items i ON i.id = o.item_id ORDER BY o.id LIMIT 100";
    const res = await query(agent, sql);
    const body = res.json();
    const bytes = sum(await dataRowBytes(providerDb.url, sql));
    expect(body.actualCost).toBe(
      formatMicro(expectedCostMicro(ordersPrices, { rows: 100, bytes, ms: body.costBreakdown.milliseconds })),
    );
  });
});

describe("maxCost", () => {
  it("refuses an estimate above the budget before anything runs: 422 budget_exceeded", async () => {
    const agent = await fundedAgent(10_000_000n);
    const res = await query(agent, "SELECT * FROM items", { maxCost: "0.0001" });
    expect(res.statusCode).toBe(422);
    expect(res.json()).toMatchObject({ code: "budget_exceeded" });
    expect(res.json().error).toMatch(/estimated cost \d+\.\d{6} USDC is above maxCost 0\.000100 USDC/);
    expect(await listLedgerEntries(gateway.ctx.db, agent, { providerId, limit: 10 })).toHaveLength(1);
    expect((await getBalance(gateway.ctx.db, agent, providerId)).balanceMicro).toBe(10_000_000n);
  });

  it("cuts a result to the rows the budget pays for, and charges at most the budget", async () => {
    const agent = await fundedAgent(10_000_000n);
    const owner = new pg.Client({ connectionString: providerDb.url });
    await owner.connect();
    await owner.query("ANALYZE items").finally(() => owner.end());
    // The planner expects 1 of these rows (an expression equal to a column): the estimate passes, the rows do not.
    const sql = "SELECT id, name FROM items WHERE id % 1000 = id ORDER BY id";
    const rowBytes = await dataRowBytes(providerDb.url, sql);
    const budget = 10_000n; // 0.01 USDC
    const res = await query(agent, sql, { maxCost: "0.01" });
    const body = res.json();
    if (res.statusCode === 422) throw new Error(`the estimate was refused: ${res.body}`);
    expect(body.truncated).toBe(true);
    const kept = body.rowCount;
    expect(body.rows).toHaveLength(kept);
    const ms = body.costBreakdown.milliseconds;
    const cost = (rows: number) =>
      expectedCostMicro(prices, { rows, bytes: sum(rowBytes.slice(0, rows)), ms });
    expect(cost(kept) <= budget).toBe(true);
    expect(cost(kept + 1) > budget).toBe(true);
    expect(body.actualCost).toBe(formatMicro(cost(kept)));
    expect((await getBalance(gateway.ctx.db, agent, providerId)).balanceMicro).toBe(10_000_000n - cost(kept));
  });

  it("answers truncated: false when the result fits", async () => {
    const agent = await fundedAgent(10_000_000n);
    const res = await query(agent, "SELECT 1 WHERE false", { maxCost: 1 });
    expect(res.json()).toMatchObject({ truncated: false, actualCost: "0.000500" });
  });

  it("rolls back a write that passes the budget", async () => {
    const agent = await fundedAgent(10_000_000n);
    const res = await query(agent, "UPDATE items SET name = name WHERE id <= 250 RETURNING id, name", {
      maxCost: "0.0006",
    });
    expect(res.statusCode, res.body).toBe(422);
    expect(res.json()).toMatchObject({ code: "budget_exceeded" });
    expect((await getBalance(gateway.ctx.db, agent, providerId)).balanceMicro).toBe(10_000_000n);
  });

  it.each([["-1"], ["abc"], ["0.0000001"], [-0.5]])("answers 400 for maxCost %j", async (maxCost) => {
    const agent = await fundedAgent(10_000_000n);
    const res = await query(agent, "SELECT 1", { maxCost });
    expect(res.statusCode).toBe(400);
    expect(res.json().error).toMatch(/maxCost/);
  });
});

describe("daily limits on REST", () => {
  it("refuses with 422 budget_exceeded once today's limit is spent, and never passes it", async () => {
    const agent = await fundedAgent(10_000_000n);
    await setDailyLimit(gateway.ctx.db, agent, providerId, 4000n);
    // Each costs the minimum, 500, and needs a row's worth, 1 500, held before it runs: six fit in 4 000.
    for (let i = 0; i < 6; i++) expect((await query(agent, "SELECT 1 WHERE false")).statusCode).toBe(200);
    const refused = await query(agent, "SELECT 1 WHERE false");
    expect(refused.statusCode, refused.body).toBe(422);
    expect(refused.json()).toMatchObject({ code: "budget_exceeded" });
    expect(refused.json().error).toMatch(
      /daily limit of 0\.004000 USDC with this provider reached \(0\.003000 spent today\)/,
    );
    expect((await getBalance(gateway.ctx.db, agent, providerId)).balanceMicro).toBe(10_000_000n - 3000n);
  });
});
