import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { TestDatabase } from "../../test/support/database.js";
import { depositFor } from "../../test/support/fixtures.js";
import {
  createProviderDatabase,
  registerPricedProvider,
  startTestGateway,
  type TestGateway,
} from "../../test/support/gateway.js";
import { getBalance, listLedgerEntries } from "../billing/ledger.js";

let gateway: TestGateway;
let providerDb: TestDatabase;
let providerId: string;
let apiKey: string;
let provider: pg.Pool;

// 1 USDC per 1000 rows: a row costs 1000 micro-USDC.
beforeAll(async () => {
  gateway = await startTestGateway();
  providerDb = await createProviderDatabase(100);
  ({ providerId, apiKey } = await registerPricedProvider(gateway, providerDb.url));
  provider = new pg.Pool({ connectionString: providerDb.url, max: 2 });
  await provider.query("CREATE SEQUENCE tickets");
  // A provider's function that writes: a SELECT calling it writes without being a write statement.
  await provider.query(
    "CREATE FUNCTION add_items(marker text, n int) RETURNS SETOF int LANGUAGE sql AS $$ INSERT INTO items (name) SELECT marker FROM generate_series(1, n) RETURNING id $$",
  );
});
afterAll(async () => {
  await provider?.end();
  await gateway?.close();
  await providerDb?.drop();
});

function fundedAgent(amountMicro: bigint): Promise<string> {
  return depositFor(gateway.ctx.db, providerId, amountMicro);
}

function query(agentWallet: string, sql: string, params?: unknown[]) {
  return gateway.app.inject({
    method: "POST",
    url: "/api/query",
    payload: { sql, agentWallet, providerId, ...(params ? { params } : {}) },
  });
}

/** Waits until nothing is held for the agent (a shared hold is released shortly after its last request). */
async function settled(agentWallet: string) {
  for (let i = 0; i < 100; i++) {
    const balance = await getBalance(gateway.ctx.db, agentWallet, providerId);
    if (balance.reservedMicro === 0n) return balance;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  throw new Error("the agent's funds are still held");
}

async function ledgerSum(agentWallet: string): Promise<bigint> {
  const entries = await listLedgerEntries(gateway.ctx.db, agentWallet, { providerId, limit: 100 });
  return entries.reduce((sum, entry) => sum + entry.amountMicro, 0n);
}

describe("POST /api/query under concurrency", () => {
  it("concurrent reads of one agent never spend more than its balance, and each is charged once", async () => {
    const agent = await fundedAgent(12_000n); // 12 rows
    const answers = await Promise.all(
      Array.from({ length: 30 }, (_, i) => query(agent, "SELECT id FROM items WHERE id = $1", [i + 1])),
    );
    const statuses = answers.map((answer) => answer.statusCode);
    const paid = statuses.filter((status) => status === 200).length;
    expect(statuses.every((status) => status === 200 || status === 402)).toBe(true);
    expect(paid).toBeGreaterThan(0);
    expect(paid).toBeLessThanOrEqual(12);
    const balance = await settled(agent);
    expect(balance.balanceMicro).toBe(12_000n - BigInt(paid) * 1_000n);
    expect(await ledgerSum(agent)).toBe(balance.balanceMicro);
    const entries = await listLedgerEntries(gateway.ctx.db, agent, { providerId, limit: 100 });
    expect(entries.filter((entry) => entry.type === "query")).toHaveLength(paid);
  });

  it("concurrent writes that cannot be paid for are rolled back", async () => {
    const agent = await fundedAgent(5_000n); // 5 rows
    const marker = `w-${agent.slice(2, 10)}`;
    const answers = await Promise.all(
      Array.from({ length: 12 }, () => query(agent, "INSERT INTO items (name) VALUES ($1)", [marker])),
    );
    const paid = answers.filter((answer) => answer.statusCode === 200).length;
    expect(answers.every((answer) => answer.statusCode === 200 || answer.statusCode === 402)).toBe(true);
    const { rows } = await provider.query("SELECT count(*)::int AS n FROM items WHERE name = $1", [marker]);
    expect(rows[0].n).toBe(paid);
    const balance = await settled(agent);
    expect(balance.balanceMicro).toBe(5_000n - BigInt(paid) * 1_000n);
    expect(await ledgerSum(agent)).toBe(balance.balanceMicro);
  });
});

describe("POST /api/query: reads in one round trip", () => {
  it("runs a SELECT that writes (nextval) in a read-write transaction, and charges it", async () => {
    const agent = await fundedAgent(10_000n);
    const res = await query(agent, "SELECT nextval('tickets') AS ticket");
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({ rowCount: 1, actualCost: "0.001000" });
    const next = await provider.query("SELECT last_value::int AS v FROM tickets");
    expect(next.rows[0].v).toBe(Number(res.json().rows[0].ticket));
  });

  it("rolls back a data-modifying SELECT whose result cannot be paid for", async () => {
    const agent = await fundedAgent(2_000n); // 2 rows
    const marker = `cte-${agent.slice(2, 10)}`;
    const res = await query(agent, "SELECT add_items($1, 3) AS id", [marker]);
    expect(res.statusCode).toBe(402);
    const { rows } = await provider.query("SELECT count(*)::int AS n FROM items WHERE name = $1", [marker]);
    expect(rows[0].n).toBe(0);
    expect(await settled(agent)).toMatchObject({ balanceMicro: 2_000n });
  });

  it("estimates before running, and reuses the estimate of a statement repeated with other params", async () => {
    const agent = await fundedAgent(1_000_000n);
    const sql = "SELECT id FROM items WHERE id <= $1";
    const first = (await query(agent, sql, [50])).json();
    expect(first.rowCount).toBe(50);
    expect(first.estimatedCost).not.toBe("0.000000");
    const second = (await query(agent, sql, [3])).json();
    expect(second).toMatchObject({ rowCount: 3, estimatedCost: first.estimatedCost, actualCost: "0.003000" });
  });

  it("answers the statement's own error when it cannot even be explained", async () => {
    const agent = await fundedAgent(1_000_000n);
    const res = await query(agent, "SELECT no_such_column FROM items");
    expect(res.statusCode).toBe(400);
    expect(res.json().error).toMatch(/no_such_column.*42703/);
    expect((await query(agent, "SELECT 1 AS one")).statusCode).toBe(200);
  });
});

describe("POST /api/query: pricing", () => {
  it("charges a new price set through the API from the very next query", async () => {
    const agent = await fundedAgent(1_000_000n);
    expect((await query(agent, "SELECT 1")).json().actualCost).toBe("0.001000");
    const priced = await gateway.app.inject({
      method: "POST",
      url: `/api/providers/${providerId}/pricing`,
      headers: { "x-api-key": apiKey },
      payload: { basePricePer1000Rows: 3, markupMultiplier: 1 },
    });
    expect(priced.statusCode).toBe(200);
    try {
      expect((await query(agent, "SELECT 1")).json().actualCost).toBe("0.003000");
    } finally {
      await gateway.app.inject({
        method: "POST",
        url: `/api/providers/${providerId}/pricing`,
        headers: { "x-api-key": apiKey },
        payload: { basePricePer1000Rows: 1, markupMultiplier: 1 },
      });
    }
  });
});

describe("POST /api/query: nothing from the database leaves unpaid", () => {
  it("bounds the database's error text to 256 bytes and charges it as one row", async () => {
    const agent = await fundedAgent(10_000n);
    const res = await query(agent, "SELECT (json_agg(i)::text)::int FROM items i");
    expect(res.statusCode).toBe(400);
    const { error, code } = res.json();
    expect(code).toBe("22P02");
    expect(Buffer.byteLength(error)).toBeLessThan(400);
    expect(error).toMatch(
      /^the database refused the statement: invalid input syntax for type integer: .*… \(SQLSTATE 22P02\)$/s,
    );
    expect((await settled(agent)).balanceMicro).toBe(10_000n - 1_000n);
    const [entry] = await listLedgerEntries(gateway.ctx.db, agent, { providerId, limit: 1 });
    expect(entry).toMatchObject({
      type: "query",
      amountMicro: -1_000n,
      metadata: { rowCount: 1, failed: true },
    });
  });

  it("needs a row's worth of balance before anything runs", async () => {
    const agent = await fundedAgent(999n);
    const res = await query(agent, "SELECT (json_agg(i)::text)::int FROM items i");
    expect(res.statusCode).toBe(402);
    expect((await settled(agent)).balanceMicro).toBe(999n);
  });

  it("refuses EXPLAIN ANALYZE of a write and data-modifying CTEs, changing nothing", async () => {
    const agent = await fundedAgent(1_000_000n);
    const before = (await provider.query("SELECT sum(length(name))::int AS n FROM items")).rows[0].n;
    for (const sql of [
      "EXPLAIN ANALYZE UPDATE items SET name = name || 'x' WHERE id > 0",
      "WITH u AS (UPDATE items SET name = name || 'x' WHERE id > 0 RETURNING 1) SELECT count(*) FROM u",
    ]) {
      const res = await query(agent, sql);
      expect(res.statusCode, sql).toBe(403);
    }
    expect((await provider.query("SELECT sum(length(name))::int AS n FROM items")).rows[0].n).toBe(before);
    expect((await settled(agent)).balanceMicro).toBe(1_000_000n);
  });

  it("rolls back a write above the provider's rows written per statement, uncharged", async () => {
    const agent = await fundedAgent(1_000_000n);
    const set = await gateway.app.inject({
      method: "POST",
      url: `/api/providers/${providerId}/pricing`,
      headers: { "x-api-key": apiKey },
      payload: { basePricePer1000Rows: 1, markupMultiplier: 1, maxRowsWrittenPerStatement: 10 },
    });
    expect(set.statusCode).toBe(200);
    try {
      const res = await query(agent, "UPDATE items SET name = 'all of them' WHERE id = id");
      expect(res.statusCode).toBe(403);
      expect(res.json().error).toMatch(
        /wrote \d+ rows, more than the provider allows in one statement \(10\)/,
      );
      const { rows } = await provider.query(
        "SELECT count(*)::int AS n FROM items WHERE name = 'all of them'",
      );
      expect(rows[0].n).toBe(0);
      expect((await query(agent, "UPDATE items SET name = name WHERE id <= 10")).statusCode).toBe(200);
      expect((await settled(agent)).balanceMicro).toBe(1_000_000n - 10_000n);
    } finally {
      await gateway.app.inject({
        method: "POST",
        url: `/api/providers/${providerId}/pricing`,
        headers: { "x-api-key": apiKey },
        payload: { basePricePer1000Rows: 1, markupMultiplier: 1, maxRowsWrittenPerStatement: 1000 },
      });
    }
  });
});
