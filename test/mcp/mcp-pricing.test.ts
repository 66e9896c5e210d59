import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import pg from "pg";
import type { Hex } from "viem";
import { generatePrivateKey, privateKeyToAddress } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { setDailyLimit } from "../../src/billing/daily-limits.js";
import { formatMicro, parseMicro } from "../../src/billing/money.js";
import { createAgentToken } from "../../src/proxy/agent-token.js";
import { createMetadataDatabase, type OwnedTestDatabase, type TestDatabase } from "../support/database.js";
import { dataRowBytes, expectedCostMicro, type TestPrices } from "../support/expected-cost.js";
import { createProviderDatabase } from "../support/gateway.js";
import { remoteMcpClient, stdioMcpClient } from "../support/mcp-clients.js";
import {
  creditAgent,
  ledgerStateOf,
  type PgtollProcess,
  registerProviderOver,
  startPgtollProcess,
} from "../support/pgtoll-process.js";

/** Every dimension: rows, a minimum, bytes, time and a table's own price. */
const PRICING = {
  basePricePer1000Rows: 1,
  markupMultiplier: 1.5,
  minimumCostPerStatement: 0.0005,
  pricePerMB: 2,
  pricePerSecond: 0.01,
  tablePrices: { orders: 5 },
};
const timed: TestPrices = {
  basePerThousandRowsMicro: 1_000_000n,
  markupPpm: 1_500_000n,
  minimumMicro: 500n,
  perMBMicro: 2_000_000n,
  perSecondMicro: 10_000n,
};
/**
 * The same but time, so that a statement's cost is known exactly beforehand, and rows ten times cheaper, so that a
 * row (0.00015 USDC and its bytes) costs less than the minimum: charging a statement as many would show.
 */
const UNTIMED_PRICING = { ...PRICING, basePricePer1000Rows: 0.1, pricePerSecond: 0 };
const untimed: TestPrices = {
  basePerThousandRowsMicro: 100_000n,
  markupPpm: 1_500_000n,
  minimumMicro: 500n,
  perMBMicro: 2_000_000n,
};
const untimedOrders: TestPrices = { ...untimed, basePerThousandRowsMicro: 5_000_000n };
const FULL_PRICE =
  '1.500000 per 1000 rows; minimum 0.000500 per statement; 3.000000 per MB; 0.015000 per second; table "orders" 7.500000 per 1000 rows';
const FUNDS = 20_000_000n;

/** 100 of the 300 items, which the planner, without statistics on `id % 3`, estimates at 2. */
const UNDERESTIMATED = "SELECT id, name, created_at FROM items WHERE id % 3 = 0 ORDER BY id";
const ALL_ITEMS = "SELECT id, name, created_at FROM items ORDER BY id";

let meta: { db: TestDatabase; close(): Promise<void> };
let providerDb: OwnedTestDatabase;
let pgtoll: PgtollProcess;
let fullId: string;
let untimedId: string;
const clients: Client[] = [];

beforeAll(async () => {
  meta = await createMetadataDatabase();
  providerDb = await createProviderDatabase(300);
  // Statistics now, so that autovacuum does not change a plan (and an EXPLAIN's cost) halfway through.
  const admin = new pg.Client({ connectionString: providerDb.adminUrl });
  await admin.connect();
  await admin.query("ANALYZE items, orders");
  await admin.end();
  pgtoll = await startPgtollProcess(meta.db.url, {});
  fullId = await registerProviderOver(pgtoll.httpUrl, providerDb.url, PRICING);
  untimedId = await registerProviderOver(pgtoll.httpUrl, providerDb.url, UNTIMED_PRICING);
}, 120_000);
afterAll(async () => {
  for (const client of clients) await client.close().catch(() => {});
  await pgtoll?.stop();
  await providerDb?.drop();
  await meta?.close();
});

interface Agent {
  key: Hex;
  wallet: string;
  providerId: string;
}

async function fundedAgent(providerId: string, funds = FUNDS): Promise<Agent> {
  const key = generatePrivateKey();
  const wallet = privateKeyToAddress(key).toLowerCase();
  await creditAgent(meta.db.url, wallet, providerId, funds);
  return { key, wallet, providerId };
}

async function remote(agent: Agent) {
  const opened = await remoteMcpClient(
    pgtoll.httpUrl,
    agent.providerId,
    await createAgentToken(agent.key, agent.providerId),
  );
  clients.push(opened.client);
  return opened;
}

/** The stdio server as an agent host runs it: its daily limit comes from the HTTP API. */
async function stdio(agent: Agent): Promise<Client> {
  const client = await stdioMcpClient(pgtoll, agent.providerId, agent.key);
  clients.push(client);
  return client;
}

async function call(client: Client, name: string, args: Record<string, unknown> = {}) {
  return (await client.callTool({ name, arguments: args })) as CallToolResult;
}

function text(result: CallToolResult): string {
  return result.content.map((part) => (part.type === "text" ? part.text : "")).join("");
}

interface QueryAnswer {
  rows: { id: number }[];
  rowCount: number;
  truncated: boolean;
  command: string;
  cost: string;
  balance: string;
  note?: string;
  estimateCost?: string;
  costBreakdown?: Record<string, unknown>;
}

async function query(client: Client, args: Record<string, unknown>): Promise<QueryAnswer> {
  const result = await call(client, "query", args);
  expect(result.isError, text(result)).toBeFalsy();
  return result.structuredContent as unknown as QueryAnswer;
}

const micro = (usdc: string | undefined) => parseMicro(String(usdc))!;
const sum = (values: number[]) => values.reduce((a, b) => a + b, 0);

/** The payload bytes of each row `sql` returns, measured on the provider's database directly. */
const rowBytesOf = (sql: string) => dataRowBytes(providerDb.url, sql);

/** What `EXPLAIN (FORMAT JSON) sql` costs at `prices`: one row, its plan's bytes. */
async function explainCost(sql: string, prices: TestPrices): Promise<bigint> {
  const bytes = await rowBytesOf(`EXPLAIN (FORMAT JSON) ${sql}`);
  expect(bytes).toHaveLength(1);
  return expectedCostMicro(prices, { rows: 1, bytes: bytes[0] });
}

/** The agent's balance once its sessions ended and released their holds, with the ledger's invariants checked. */
async function settledBalance(agent: Agent): Promise<bigint> {
  await expect
    .poll(async () => (await ledgerStateOf(meta.db.url, agent.wallet, agent.providerId)).reservations, {
      timeout: 10_000,
    })
    .toBe(0);
  const state = await ledgerStateOf(meta.db.url, agent.wallet, agent.providerId);
  expect(state).toMatchObject({ chained: true, entriesSumMicro: state.balanceMicro, reservedMicro: 0n });
  return state.balanceMicro;
}

async function limitDaily(agent: Agent, limitMicro: bigint): Promise<void> {
  const db = new pg.Client({ connectionString: meta.db.url });
  await db.connect();
  try {
    await setDailyLimit(db, agent.wallet, agent.providerId, limitMicro);
  } finally {
    await db.end();
  }
}

describe("MCP query, priced beyond rows", () => {
  it("charges rows, bytes, the minimum and a table's price exactly by the cost rule, and shows the parts", async () => {
    const agent = await fundedAgent(untimedId);
    const { client, end } = await remote(agent);
    const itemsSql = "SELECT id, name, created_at FROM items ORDER BY id LIMIT 20";
    const ordersSql =
      "SELECT o.id, o.name FROM orders o JOIN items i ON i.id = o.item_id ORDER BY o.id LIMIT 30";
    const emptySql = "SELECT 1 WHERE false";
    const expected = [
      { sql: itemsSql, prices: untimed, rows: 20 },
      { sql: ordersSql, prices: untimedOrders, rows: 30 },
      { sql: emptySql, prices: untimed, rows: 0 },
    ];
    let spent = 0n;
    for (const { sql, prices, rows } of expected) {
      const bytes = await rowBytesOf(sql);
      const cost = expectedCostMicro(prices, { rows: bytes.length, bytes: sum(bytes) });
      const answer = await query(client, { sql });
      spent += cost;
      expect(answer).toMatchObject({ rowCount: rows, truncated: false, command: "SELECT" });
      expect(answer.cost).toBe(formatMicro(cost));
      expect(answer.balance).toBe(formatMicro(FUNDS - spent));
      expect(answer.costBreakdown).toMatchObject({
        rows,
        bytes: sum(bytes),
        minimumApplied: rows === 0,
        cost: formatMicro(cost),
      });
    }
    await end();
    expect(await settledBalance(agent)).toBe(FUNDS - spent);
  }, 30_000);

  it("charges statement time too, by the milliseconds its parts name", async () => {
    const agent = await fundedAgent(fullId);
    const { client, end } = await remote(agent);
    const sql = "SELECT id, pg_sleep(0.05)::text AS slept FROM items WHERE id <= 2";
    const bytes = await rowBytesOf(sql);
    const answer = await query(client, { sql });
    const parts = answer.costBreakdown as { milliseconds: number; timeCost: string; cost: string };
    expect(parts.milliseconds).toBeGreaterThanOrEqual(100);
    expect(micro(parts.timeCost)).toBeGreaterThan(0n);
    expect(answer.cost).toBe(
      formatMicro(expectedCostMicro(timed, { rows: 2, bytes: sum(bytes), ms: parts.milliseconds })),
    );
    await end();
    expect(await settledBalance(agent)).toBe(FUNDS - micro(answer.cost));
  }, 30_000);
});

describe("MCP query with max_cost", () => {
  it("refuses a statement estimated above max_cost without running it; only the estimate is charged", async () => {
    const agent = await fundedAgent(untimedId);
    const { client, end } = await remote(agent);
    const refused = await call(client, "query", { sql: ALL_ITEMS, max_cost: "0.05" });
    expect(refused.isError).toBe(true);
    const estimateCost = await explainCost(ALL_ITEMS, untimed);
    const own = formatMicro(estimateCost).replace(".", "\\.");
    expect(text(refused)).toMatch(
      new RegExp(
        `^budget_exceeded: the estimated cost \\d+\\.\\d{6} USDC, with the estimate's own ${own} USDC, is above ` +
          `max_cost 0\\.050000 USDC; the statement was not run \\(this call cost ${own} USDC, for the estimate\\)$`,
      ),
    );
    // Had the statement run, it would have cost at least the minimum more.
    expect((await call(client, "balance")).structuredContent).toMatchObject({
      balance: formatMicro(FUNDS - estimateCost),
    });
    await end();
    expect(await settledBalance(agent)).toBe(FUNDS - estimateCost);
  }, 30_000);

  it("cuts a result that would pass max_cost to the rows it pays for, and returns every row charged", async () => {
    const agent = await fundedAgent(untimedId);
    const { client, end } = await remote(agent);
    const maxCost = 20_000n;
    const answer = await query(client, { sql: UNDERESTIMATED, max_cost: formatMicro(maxCost) });
    expect(answer.truncated).toBe(true);
    expect(answer.note).toMatch(/max_cost/);
    expect(micro(answer.cost)).toBeLessThanOrEqual(maxCost);
    const kept = answer.rows.length;
    expect(kept).toBeGreaterThan(0);
    expect(kept).toBeLessThan(100);
    expect(answer.rowCount).toBe(kept);
    expect(answer.rows.map((row) => row.id)).toEqual(Array.from({ length: kept }, (_, i) => 3 * (i + 1)));

    // Computed apart: the rows kept, with their bytes, fit the budget; one more would not.
    const bytes = await rowBytesOf(UNDERESTIMATED);
    const costOf = (rows: number) => expectedCostMicro(untimed, { rows, bytes: sum(bytes.slice(0, rows)) });
    const estimateCost = await explainCost(UNDERESTIMATED, untimed);
    expect(micro(answer.cost)).toBe(estimateCost + costOf(kept));
    expect(estimateCost + costOf(kept + 1)).toBeGreaterThan(maxCost);
    expect(answer.balance).toBe(formatMicro(FUNDS - micro(answer.cost)));
    expect(answer.costBreakdown).toMatchObject({ rows: kept, cost: formatMicro(costOf(kept)) });

    // A result within max_cost is whole, its rows read with their params, and charged as one statement: its
    // minimum once.
    const smallSql = "SELECT id, name, created_at FROM items WHERE id <= $1 ORDER BY id";
    const small = await query(client, { sql: smallSql, params: [1], max_cost: "1" });
    expect(small).toMatchObject({ rowCount: 1, truncated: false, command: "SELECT" });
    expect(small.note).toBeUndefined();
    const smallEstimate = await explainCost(smallSql.replace("$1", "1"), untimed);
    expect(small.estimateCost).toBe(formatMicro(smallEstimate));
    expect(small.cost).toBe(formatMicro(smallEstimate + untimed.minimumMicro!));
    expect(small.costBreakdown).toMatchObject({ rows: 1, minimumApplied: true });

    // A max_cost below the minimum runs nothing, not even the estimate.
    const below = await call(client, "query", { sql: smallSql, params: [1], max_cost: "0.0001" });
    expect(text(below)).toMatch(
      /^budget_exceeded: the statement's cost \(at least the provider's minimum of 0\.000500 USDC per statement.* is above max_cost 0\.000100 USDC; the statement was not run \(this call cost 0\.000000 USDC/,
    );

    await end();
    // The ledger holds what the answers said, and no more: the rows charged are those returned.
    expect(await settledBalance(agent)).toBe(FUNDS - micro(answer.cost) - micro(small.cost));
  }, 30_000);

  it("keeps the whole call within max_cost when statement time is priced", async () => {
    const agent = await fundedAgent(fullId);
    const { client, end } = await remote(agent);
    const maxCost = 20_000n;
    const answer = await query(client, { sql: UNDERESTIMATED, max_cost: formatMicro(maxCost) });
    expect(answer).toMatchObject({
      truncated: true,
      command: "SELECT",
      note: expect.stringMatching(/max_cost/),
    });
    expect(micro(answer.cost)).toBeLessThanOrEqual(maxCost);
    // The estimate, then the rows kept with their bytes and the statement's time, no more than what is left.
    const kept = answer.rows.length;
    const bytes = sum((await rowBytesOf(UNDERESTIMATED)).slice(0, kept));
    const { milliseconds } = answer.costBreakdown as { milliseconds: number };
    const statement = expectedCostMicro(timed, { rows: kept, bytes, ms: milliseconds });
    const estimate = micro(answer.estimateCost);
    const left = maxCost - estimate;
    expect(micro(answer.cost)).toBe(estimate + (statement < left ? statement : left));
    await end();
    expect(await settledBalance(agent)).toBe(FUNDS - micro(answer.cost));
  }, 30_000);
});

describe("MCP estimate, priced beyond rows", () => {
  it("shows the estimated bytes, the cost's parts and the whole price", async () => {
    const agent = await fundedAgent(fullId);
    const { client, end } = await remote(agent);
    const result = await call(client, "estimate", { sql: ALL_ITEMS });
    expect(result.isError, text(result)).toBeFalsy();
    const estimate = result.structuredContent as {
      estimatedRows: number;
      estimatedBytes: number;
      estimatedCost: string;
      costBreakdown: { rowsCost: string; bytesCost: string; minimumApplied: boolean };
      pricePer1000Rows: string;
      price: string;
      cost: string;
    };
    expect(estimate.estimatedRows).toBe(300);
    expect(estimate.estimatedBytes).toBeGreaterThan(300 * 10);
    expect(estimate.price).toBe(FULL_PRICE);
    expect(estimate.pricePer1000Rows).toBe("1.500000");
    const rows = { rows: estimate.estimatedRows, bytes: estimate.estimatedBytes };
    // Time is not estimated.
    expect(estimate.estimatedCost).toBe(formatMicro(expectedCostMicro(timed, rows)));
    expect(estimate.costBreakdown).toEqual({
      rowsCost: formatMicro(expectedCostMicro({ ...timed, minimumMicro: 0n, perMBMicro: 0n }, rows)),
      bytesCost: formatMicro(
        expectedCostMicro({ ...timed, minimumMicro: 0n, basePerThousandRowsMicro: 0n }, rows),
      ),
      minimumApplied: false,
    });
    // A table's own price and the minimum.
    const orders = (await call(client, "estimate", { sql: "SELECT id FROM orders WHERE false" }))
      .structuredContent as typeof estimate;
    expect(orders.pricePer1000Rows).toBe("7.500000");
    expect(orders.costBreakdown.minimumApplied).toBe(true);
    expect(orders.estimatedCost).toBe("0.000500");
    await end();
  }, 30_000);
});

describe("MCP balance and daily limits", () => {
  it("balance shows the daily limit, what was spent today and what is left, over stdio and remote", async () => {
    const agent = await fundedAgent(untimedId);
    const client = await stdio(agent);
    const unlimited = (await call(client, "balance")).structuredContent;
    expect(unlimited).toMatchObject({
      balance: formatMicro(FUNDS),
      price:
        '0.150000 per 1000 rows; minimum 0.000500 per statement; 3.000000 per MB; table "orders" 7.500000 per 1000 rows',
      dailyLimit: null,
      spentToday: "0.000000",
      remainingToday: null,
    });
    const spent = micro((await query(client, { sql: "SELECT id FROM items WHERE id <= 10" })).cost);
    await limitDaily(agent, 2_000_000n);
    const limited = {
      balance: formatMicro(FUNDS - spent),
      dailyLimit: "2.000000",
      spentToday: formatMicro(spent),
      remainingToday: formatMicro(2_000_000n - spent),
      resetsAt: expect.stringMatching(/T00:00:00\.000Z$/),
    };
    // The balance tool writes the session's charges first: spentToday counts them.
    expect((await call(client, "balance")).structuredContent).toMatchObject(limited);
    const { client: remoteClient, end } = await remote(agent);
    expect((await call(remoteClient, "balance")).structuredContent).toMatchObject(limited);
    await end();
  }, 60_000);

  it("a daily limit stops a query: the tool error names it, with SQLSTATE PT422", async () => {
    const agent = await fundedAgent(untimedId);
    await limitDaily(agent, 100n);
    const { client, end } = await remote(agent);
    const refused = await call(client, "query", { sql: "SELECT id FROM items WHERE id <= 3" });
    expect(refused.isError).toBe(true);
    expect(text(refused)).toMatch(
      /^daily limit of 0\.000100 USDC with this provider reached \(0\.000000 spent today\): the statement was not run.* \(SQLSTATE PT422\)/,
    );
    expect((await call(client, "balance")).structuredContent).toMatchObject({
      dailyLimit: "0.000100",
      spentToday: "0.000000",
      remainingToday: "0.000100",
    });
    await end();
    expect(await settledBalance(agent)).toBe(FUNDS);
  }, 30_000);

  it("a daily limit reached mid-result under max_cost is named, not taken for max_cost", async () => {
    const agent = await fundedAgent(untimedId);
    await limitDaily(agent, 15_000n);
    const { client, end } = await remote(agent);
    const cut = await call(client, "query", { sql: UNDERESTIMATED, max_cost: "1" });
    expect(cut.isError, JSON.stringify(cut.structuredContent)).toBe(true);
    const said =
      /^daily limit of 0\.015000 USDC with this provider reached \(\d+\.\d{6} spent today\): the result was cut off after (\d+) rows, which were charged \(SQLSTATE PT422\)\. It was charged (\d+\.\d{6}) USDC\.$/.exec(
        text(cut),
      );
    expect(said, text(cut)).not.toBeNull();
    // The estimate and the rows delivered, computed apart.
    const delivered = Number(said![1]);
    const bytes = (await rowBytesOf(UNDERESTIMATED)).slice(0, delivered);
    const charged =
      (await explainCost(UNDERESTIMATED, untimed)) +
      expectedCostMicro(untimed, { rows: delivered, bytes: sum(bytes) });
    expect(said![2]).toBe(formatMicro(charged));
    expect(charged).toBeLessThanOrEqual(15_000n);
    await end();
    expect(await settledBalance(agent)).toBe(FUNDS - charged);
  }, 30_000);
});

describe("MCP query with max_cost on a time-priced provider", () => {
  it("stops the statement at the time max_cost pays for, and charges no more than max_cost", async () => {
    const timeOnly = { basePricePer1000Rows: 0.000001, markupMultiplier: 1, pricePerSecond: 1 };
    const secondId = await registerProviderOver(pgtoll.httpUrl, providerDb.url, timeOnly);
    const agent = await fundedAgent(secondId);
    const { client, end } = await remote(agent);
    const started = performance.now();
    const answer = await call(client, "query", { sql: "SELECT pg_sleep(2)", max_cost: "0.2" });
    const ms = performance.now() - started;
    expect(ms, `answered after ${ms} ms: ${text(answer)}`).toBeLessThan(1200);
    expect(text(answer)).toMatch(/stopped at max_cost.*time up to max_cost/);
    await end();
    const spent = FUNDS - (await settledBalance(agent));
    expect(spent, `charged ${spent}`).toBeLessThanOrEqual(200_000n);
    expect(spent).toBeGreaterThanOrEqual(100_000n);
  }, 30_000);
});
