import pg from "pg";
import Cursor from "pg-cursor";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { setDailyLimit } from "../../src/billing/daily-limits.js";
import { listLedgerEntries } from "../../src/billing/ledger.js";
import { formatMicro } from "../../src/billing/money.js";
import { SqlState } from "../../src/db/sql-state.js";
import type { TestDatabase } from "../support/database.js";
import { dataRowBytes, expectedCostMicro, type TestPrices } from "../support/expected-cost.js";
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
import { missingTool, runProcess, waitForCharges } from "../support/real-clients.js";

let gateway: TestGateway;
let proxy: TestProxy;
let providerDb: TestDatabase;
/** Priced on rows, a minimum, bytes and a table. */
let providerId: string;
/** Priced on time as well. */
let timedProviderId: string;

const prices: TestPrices = {
  basePerThousandRowsMicro: 1_000_000n,
  markupPpm: 1_500_000n,
  minimumMicro: 500n,
  perMBMicro: 2_000_000n,
};
const ordersPrices: TestPrices = { ...prices, basePerThousandRowsMicro: 5_000_000n };
const timedPrices: TestPrices = { ...prices, perSecondMicro: 10_000n };
const FUNDS = 100_000_000n;

const PRICING = {
  basePricePer1000Rows: 1,
  markupMultiplier: 1.5,
  minimumCostPerStatement: 0.0005,
  pricePerMB: 2,
  tablePrices: { orders: 5 },
};

beforeAll(async () => {
  gateway = await startTestGateway();
  proxy = await startTestProxy(gateway);
  providerDb = await createProviderDatabase(300);
  ({ providerId } = await registerPricedProvider(gateway, providerDb.url, PRICING));
  ({ providerId: timedProviderId } = await registerPricedProvider(gateway, providerDb.url, {
    ...PRICING,
    pricePerSecond: 0.01,
    tablePrices: {},
  }));
});
afterAll(async () => {
  await proxy?.close();
  await gateway?.close();
  await providerDb?.drop();
});

const sum = (values: number[]) => values.reduce((a, b) => a + b, 0);

/** What the agent's query entries with `provider` add up to, once its sessions ended. */
async function charged(agent: TestAgent, provider = providerId): Promise<bigint> {
  await waitForCharges(proxy);
  const entries = await listLedgerEntries(gateway.ctx.db, agent.wallet, {
    providerId: provider,
    limit: 1000,
  });
  return entries.filter((e) => e.type === "query").reduce((total, e) => total - e.amountMicro, 0n);
}

/** Three statements, priced by rows and bytes, by the minimum, and by a table's price; the cost of each. */
async function pricedStatements(): Promise<{ sql: string; cost: bigint }[]> {
  const statements = [
    { sql: "SELECT id, name, created_at FROM items ORDER BY id LIMIT 200", prices },
    { sql: "SELECT 1 WHERE false", prices },
    {
      sql: "SELECT o.id, o.name FROM orders o JOIN items i ON i.id = o.item_id ORDER BY o.id LIMIT 100",
      prices: ordersPrices,
    },
  ];
  return Promise.all(
    statements.map(async ({ sql, prices: p }) => {
      const rowBytes = await dataRowBytes(providerDb.url, sql);
      return { sql, cost: expectedCostMicro(p, { rows: rowBytes.length, bytes: sum(rowBytes) }) };
    }),
  );
}

describe("the wire proxy priced beyond rows", () => {
  it("charges a driver's statements by rows, bytes, the minimum and table prices, and shows the price", async () => {
    const agent = await fundedTestAgent(gateway, providerId, FUNDS);
    const client = await connectAgent(proxy, agent, providerId);
    const expected = await pricedStatements();
    for (const { sql } of expected) await client.query(sql);
    // Extended protocol too: the same statement, prepared.
    await client.query({ text: expected[0]!.sql, name: "prepared" });
    const { rows } = await client.query("SHOW pgtoll.price");
    expect(rows[0]["pgtoll.price"]).toBe(
      '1.500000 per 1000 rows; minimum 0.000500 per statement; 3.000000 per MB; table "orders" 7.500000 per 1000 rows',
    );
    await client.end();
    // SHOW pgtoll.* is answered by the proxy: it does not run on the database and costs nothing.
    const total = expected.reduce((s, e) => s + e.cost, 0n) + expected[0]!.cost;
    expect(await charged(agent)).toBe(total);
  });

  it("shows what the last query cost, its statements summed", async () => {
    const agent = await fundedTestAgent(gateway, providerId, FUNDS);
    const client = await connectAgent(proxy, agent, providerId);
    const expected = await pricedStatements();
    const lastQueryCost = async () =>
      JSON.parse((await client.query("SHOW pgtoll.last_query_cost")).rows[0]["pgtoll.last_query_cost"]);
    expect(await lastQueryCost()).toEqual({});
    await client.query(expected.map(({ sql }) => sql).join("; "));
    const shown = await lastQueryCost();
    const total = expected.reduce((s, e) => s + e.cost, 0n);
    expect(shown).toMatchObject({ statements: expected.length, cost: formatMicro(total) });
    // A SHOW charges nothing: the last query is still the one before it.
    expect(await lastQueryCost()).toEqual(shown);
    await client.end();
  });

  it.skipIf(missingTool("/usr/bin/psql", "apt-get install postgresql-client") !== null)(
    "charges psql's statements the same",
    async () => {
      const agent = await fundedTestAgent(gateway, providerId, FUNDS);
      const expected = await pricedStatements();
      const result = await runProcess(
        "/usr/bin/psql",
        ["-X", "-At", ...expected.flatMap(({ sql }) => ["-c", sql])],
        {
          env: {
            PGPASSWORD: await agent.token(),
            PGHOST: "127.0.0.1",
            PGPORT: String(proxy.port),
            PGUSER: agent.wallet,
            PGDATABASE: providerId,
            PGSSLMODE: "disable",
          },
        },
      );
      expect(result.code, result.stderr).toBe(0);
      expect(await charged(agent)).toBe(expected.reduce((s, e) => s + e.cost, 0n));
    },
  );

  it("charges statement time measured on the database", async () => {
    const agent = await fundedTestAgent(gateway, timedProviderId, FUNDS);
    const client = await connectAgent(proxy, agent, timedProviderId);
    const started = performance.now();
    await client.query("SELECT pg_sleep(0.3)");
    const wall = performance.now() - started;
    await client.end();
    const bytes = sum(await dataRowBytes(providerDb.url, "SELECT pg_sleep(0)"));
    const cost = await charged(agent, timedProviderId);
    const least = expectedCostMicro(timedPrices, { rows: 1, bytes, ms: 300 });
    const most = expectedCostMicro(timedPrices, { rows: 1, bytes, ms: wall + 1 });
    expect(
      cost >= least && cost <= most,
      `charged ${cost}, expected ${least} to ${most} (wall ${wall} ms)`,
    ).toBe(true);
  });
});

describe("a portal read in batches", () => {
  it("is one statement: its minimum is charged once, its rows and bytes by the batch", async () => {
    const agent = await fundedTestAgent(gateway, providerId, FUNDS);
    const client = await connectAgent(proxy, agent, providerId);
    const sql = "SELECT id FROM items WHERE id <= 5 ORDER BY id";
    const cursor = client.query(new Cursor(sql));
    let rows = 0;
    for (;;) {
      const batch = await cursor.read(1);
      if (batch.length === 0) break;
      rows += batch.length;
    }
    await cursor.close();
    await client.end();
    expect(rows).toBe(5);
    // Each batch of one row is charged by itself (rounded on its own), the minimum with the first alone.
    const rowBytes = await dataRowBytes(providerDb.url, sql);
    const first = expectedCostMicro(prices, { rows: 1, bytes: rowBytes[0]! });
    const later = rowBytes
      .slice(1)
      .reduce(
        (total, bytes) => total + expectedCostMicro({ ...prices, minimumMicro: 0n }, { rows: 1, bytes }),
        0n,
      );
    expect(await charged(agent)).toBe(first + later);
  });
});

describe("a session's budget", () => {
  it("ends a statement at the budget with its own SQLSTATE, the rows delivered paid, and goes on when raised", async () => {
    const agent = await fundedTestAgent(gateway, providerId, FUNDS);
    const client = await connectAgent(proxy, agent, providerId);
    await client.query("SET pgtoll.max_session_cost = '0.05'");
    expect((await client.query("SHOW pgtoll.max_session_cost")).rows[0]["pgtoll.max_session_cost"]).toBe(
      "0.050000",
    );
    const failure = await client
      .query("SELECT id, name FROM items ORDER BY id")
      .catch((error: pg.DatabaseError) => error);
    expect(failure).toBeInstanceOf(Error);
    expect((failure as pg.DatabaseError).code).toBe(SqlState.budgetExceeded);
    expect((failure as Error).message).toMatch(/pgtoll\.max_session_cost.*0\.050000/);
    const spent = (await client.query("SHOW pgtoll.session_cost")).rows[0]["pgtoll.session_cost"];
    expect(Number(spent)).toBeLessThanOrEqual(0.05);
    expect(Number(spent)).toBeGreaterThan(0.04);
    // Over budget: nothing more runs...
    const next = await client.query("SELECT 1").catch((error: pg.DatabaseError) => error);
    expect((next as pg.DatabaseError).code).toBe(SqlState.budgetExceeded);
    // ...until the budget is raised or reset.
    await client.query("RESET pgtoll.max_session_cost");
    expect((await client.query("SELECT 1")).rows).toEqual([{ "?column?": 1 }]);
    await client.end();
  });

  it("is set at startup with options, and the rows a cut statement delivered are exactly what it charged", async () => {
    const agent = await fundedTestAgent(gateway, providerId, FUNDS);
    const client = await connectAgent(proxy, agent, providerId, {
      options: "-c pgtoll.max_session_cost=0.01",
    });
    const sql = "SELECT id, name FROM items ORDER BY id";
    // Rows as they arrive, before the error that ends the statement (pg drops them from a failed result).
    let received = 0;
    const cut = await new Promise<pg.DatabaseError>((resolve, reject) => {
      const query = client.query(new pg.Query({ text: sql }));
      query.on("row", () => received++);
      query.on("error", (error) => resolve(error as pg.DatabaseError));
      query.on("end", () => reject(new Error("the statement was not cut off")));
    });
    expect(cut.code).toBe(SqlState.budgetExceeded);
    expect(cut.message).toContain(`cut off after ${received} rows`);
    await client.end();
    const rowBytes = await dataRowBytes(providerDb.url, sql);
    const paid = expectedCostMicro(prices, { rows: received, bytes: sum(rowBytes.slice(0, received)) });
    const oneMore = expectedCostMicro(prices, {
      rows: received + 1,
      bytes: sum(rowBytes.slice(0, received + 1)),
    });
    expect(await charged(agent)).toBe(paid);
    expect(paid <= 10_000n && oneMore > 10_000n).toBe(true);
  });

  it("refuses a bad value with 22023 naming the setting", async () => {
    const agent = await fundedTestAgent(gateway, providerId, FUNDS);
    const client = await connectAgent(proxy, agent, providerId);
    for (const value of ["'-1'", "'abc'", "'0.0000001'"]) {
      const error = await client
        .query(`SET pgtoll.max_session_cost = ${value}`)
        .catch((e: pg.DatabaseError) => e);
      expect((error as pg.DatabaseError).code).toBe("22023");
      expect((error as Error).message).toMatch(/pgtoll\.max_session_cost/);
    }
    await client.end();
  });
});

describe("a query's budget", () => {
  it("ends the query that passes it, its delivered rows paid, and lets the next query run", async () => {
    const agent = await fundedTestAgent(gateway, providerId, FUNDS);
    const client = await connectAgent(proxy, agent, providerId);
    await client.query("SET pgtoll.max_query_cost = '0.01'");
    expect((await client.query("SHOW pgtoll.max_query_cost")).rows[0]["pgtoll.max_query_cost"]).toBe(
      "0.010000",
    );
    const sql = "SELECT id, name FROM items ORDER BY id";
    const cut = await client.query(sql).catch((error: pg.DatabaseError) => error);
    expect((cut as pg.DatabaseError).code).toBe(SqlState.budgetExceeded);
    expect((cut as Error).message).toMatch(
      /pgtoll\.max_query_cost of 0\.010000 USDC reached \(this query has spent/,
    );
    const received = Number(/cut off after (\d+) rows/.exec((cut as Error).message)?.[1]);
    const first = Number((await client.query("SHOW pgtoll.session_cost")).rows[0]["pgtoll.session_cost"]);
    expect(first).toBeLessThanOrEqual(0.01);
    // The budget is each query's: the next one runs, and is cut at the same point.
    const again = await client.query(sql).catch((error: pg.DatabaseError) => error);
    expect((again as Error).message).toContain(`cut off after ${received} rows`);
    expect((await client.query("SELECT 1 AS one")).rows).toEqual([{ one: 1 }]);
    // The statements of one query share its budget: the first one's rows leave less for the second.
    const two = await client
      .query(`SELECT id FROM items ORDER BY id LIMIT 2; ${sql}`)
      .catch((error: pg.DatabaseError) => error);
    const secondRows = Number(/cut off after (\d+) rows/.exec((two as Error).message)?.[1]);
    expect(secondRows).toBeLessThan(received);
    await client.end();
    const rowBytes = await dataRowBytes(providerDb.url, sql);
    const paid = expectedCostMicro(prices, { rows: received, bytes: sum(rowBytes.slice(0, received)) });
    expect(paid <= 10_000n).toBe(true);
  });

  it("holds the next statement until the cut statement's cancel is taken: the cancel never hits it", async () => {
    const agent = await fundedTestAgent(gateway, providerId, FUNDS);
    const client = await connectAgent(proxy, agent, providerId, { options: "-c pgtoll.max_query_cost=0.01" });
    // The cut statement often ends on its own before the cancel reaches its backend; a cancel that arrived
    // after that would cancel whatever runs next.
    for (let round = 0; round < 40; round++) {
      const cut = await client.query("SELECT id, name FROM items ORDER BY id").catch((error) => error);
      expect((cut as pg.DatabaseError).code).toBe(SqlState.budgetExceeded);
      expect((await client.query("SELECT pg_sleep(0.005), 1 AS one")).rows[0].one).toBe(1);
    }
    await client.end();
  });

  it("names the budget with less left when the session's is set too", async () => {
    const agent = await fundedTestAgent(gateway, providerId, FUNDS);
    const client = await connectAgent(proxy, agent, providerId, {
      options: "-c pgtoll.max_query_cost=0.5 -c pgtoll.max_session_cost=0.01",
    });
    const cut = await client.query("SELECT id, name FROM items").catch((error: pg.DatabaseError) => error);
    expect((cut as Error).message).toMatch(/pgtoll\.max_session_cost of 0\.010000/);
    await client.query("RESET pgtoll.max_session_cost");
    await client.query("SET pgtoll.max_query_cost = '0.002'");
    const next = await client.query("SELECT id, name FROM items").catch((error: pg.DatabaseError) => error);
    expect((next as Error).message).toMatch(/pgtoll\.max_query_cost of 0\.002000/);
    await client.end();
  });

  it("rolls back a write it does not pay for, whole", async () => {
    const agent = await fundedTestAgent(gateway, providerId, FUNDS);
    const client = await connectAgent(proxy, agent, providerId, { options: "-c pgtoll.max_query_cost=0.01" });
    const write = await client
      .query("INSERT INTO items (name) SELECT 'budgeted ' || g FROM generate_series(1, 200) g")
      .catch((error: pg.DatabaseError) => error);
    expect((write as pg.DatabaseError).code).toBe(SqlState.budgetExceeded);
    await client.query("RESET pgtoll.max_query_cost");
    const { rows } = await client.query("SELECT count(*)::int AS n FROM items WHERE name LIKE 'budgeted %'");
    expect(rows).toEqual([{ n: 0 }]);
    await client.end();
  });

  it("bounds a statement's time by what it leaves", async () => {
    const agent = await fundedTestAgent(gateway, timedProviderId, FUNDS);
    const client = await connectAgent(proxy, agent, timedProviderId, {
      options: "-c pgtoll.max_query_cost=0.006",
    });
    const started = performance.now();
    const stopped = await client.query("SELECT pg_sleep(3)").catch((error: pg.DatabaseError) => error);
    expect((stopped as pg.DatabaseError).code).toBe(SqlState.budgetExceeded);
    expect(performance.now() - started).toBeLessThan(1500);
    expect((await client.query("SELECT 1 AS one")).rows).toEqual([{ one: 1 }]);
    await client.end();
    expect((await charged(agent, timedProviderId)) <= 12_000n).toBe(true);
  });
});

describe("daily limits on the wire", () => {
  it("shows today's remainder and refuses past it with the budget SQLSTATE", async () => {
    const agent = await fundedTestAgent(gateway, providerId, FUNDS);
    await setDailyLimit(gateway.ctx.db, agent.wallet, providerId, 20_000n);
    const client = await connectAgent(proxy, agent, providerId);
    expect((await client.query("SHOW pgtoll.daily_remaining")).rows[0]["pgtoll.daily_remaining"]).toBe(
      "0.020000",
    );
    const failure = await client
      .query("SELECT id, name FROM items ORDER BY id")
      .catch((e: pg.DatabaseError) => e);
    expect((failure as pg.DatabaseError).code).toBe(SqlState.budgetExceeded);
    expect((failure as Error).message).toMatch(/daily limit/);
    await client.end();
    expect((await charged(agent)) <= 20_000n).toBe(true);
  });
});
