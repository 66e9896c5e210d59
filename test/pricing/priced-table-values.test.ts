import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { creditDeposit, getBalance } from "../../src/billing/ledger.js";
import { SqlState } from "../../src/db/sql-state.js";
import type { OwnedTestDatabase } from "../support/database.js";
import { randomTxHash, randomWallet } from "../support/fixtures.js";
import {
  createProviderDatabase,
  registerPricedProvider,
  startTestGateway,
  type TestGateway,
} from "../support/gateway.js";
import { connectAgent, fundedTestAgent, startTestProxy, type TestProxy } from "../support/proxy.js";

let gateway: TestGateway;
let proxy: TestProxy;
let providerDb: OwnedTestDatabase;
/** secret_prices at 1 USDC a row, folding refused. */
let pricedId: string;
/** The same, folding allowed. */
let foldingId: string;

const PRICING = { basePricePer1000Rows: 0.001, markupMultiplier: 1, tablePrices: { secret_prices: 1000 } };

beforeAll(async () => {
  gateway = await startTestGateway();
  proxy = await startTestProxy(gateway);
  providerDb = await createProviderDatabase(20);
  const owner = new pg.Client({ connectionString: providerDb.url });
  await owner.connect();
  await owner.query(`CREATE TABLE secret_prices (id int PRIMARY KEY, secret text NOT NULL);
    INSERT INTO secret_prices SELECT g, 's3cr3t-' || g || '-value' FROM generate_series(1, 400) g;
    ANALYZE secret_prices`);
  await owner.end();
  ({ providerId: pricedId } = await registerPricedProvider(gateway, providerDb.url, PRICING));
  ({ providerId: foldingId } = await registerPricedProvider(gateway, providerDb.url, {
    ...PRICING,
    allowRowFolding: true,
  }));
});
afterAll(async () => {
  await proxy?.close();
  await gateway?.close();
  await providerDb?.drop();
});

const FUNDS = 100_000_000n;

async function fundedWallet(providerId: string): Promise<string> {
  const agent = randomWallet();
  await creditDeposit(gateway.ctx.db, {
    chainId: 8453,
    txHash: randomTxHash(),
    agentWallet: agent,
    providerId,
    amountMicro: FUNDS,
    blockNumber: 1n,
  });
  return agent;
}

function restQuery(agentWallet: string, providerId: string, sql: string) {
  return gateway.app.inject({ method: "POST", url: "/api/query", payload: { sql, agentWallet, providerId } });
}

/** Reads six values a row through a cast error, one value through a single row's. */
const CAST_LEAKS = [
  "SELECT (id || '=' || secret)::int FROM secret_prices WHERE id = 3",
  "SELECT secret::int FROM items JOIN secret_prices USING (id) WHERE id = 3",
];
const FOLDING_LEAKS = [
  "SELECT string_agg(id || '=' || secret, ',')::int FROM secret_prices WHERE id BETWEEN 1 AND 6",
  "SELECT string_agg(secret, ',') FROM secret_prices",
  "SELECT array_agg(secret) FROM secret_prices",
  "SELECT ARRAY(SELECT secret FROM secret_prices)",
  "SELECT (SELECT secret FROM secret_prices WHERE id = 1), (SELECT secret FROM secret_prices WHERE id = 2)",
];
const STATISTICS = [
  "SELECT most_common_vals::text, histogram_bounds::text FROM pg_stats WHERE tablename = 'secret_prices'",
  "SELECT * FROM pg_stats_ext",
];

describe("POST /api/query: a priced table's values leave only at its price", () => {
  it.each(CAST_LEAKS)("withholds the database's text of %s and keeps its SQLSTATE", async (sql) => {
    const agent = await fundedWallet(pricedId);
    const res = await restQuery(agent, pricedId, sql);
    expect(res.statusCode, res.body).toBe(400);
    expect(res.json().code).toBe("22P02");
    expect(res.body).not.toMatch(/s3cr3t/);
    expect(res.json().error).toMatch(/SQLSTATE 22P02, data exception\).*withheld.*priced table/);
    // The error is still charged as a row, at the table's price (1 USDC).
    expect((await getBalance(gateway.ctx.db, agent, pricedId)).balanceMicro).toBe(FUNDS - 1_000_000n);
  });

  it("keeps the database's text of a statement over unpriced tables", async () => {
    const agent = await fundedWallet(pricedId);
    const res = await restQuery(agent, pricedId, "SELECT name::int FROM items WHERE id = 3");
    expect(res.statusCode, res.body).toBe(400);
    expect(res.json().error).toMatch(/invalid input syntax for type integer: "item 3"/);
  });

  it.each(FOLDING_LEAKS)("refuses %s with 403 priced-table-folding, nothing charged", async (sql) => {
    const agent = await fundedWallet(pricedId);
    const res = await restQuery(agent, pricedId, sql);
    expect(res.statusCode, res.body).toBe(403);
    expect(res.json().error).toMatch(/\(priced-table-folding\)/);
    expect(res.body).not.toMatch(/s3cr3t/);
    expect((await getBalance(gateway.ctx.db, agent, pricedId)).balanceMicro).toBe(FUNDS);
  });

  it.each(FOLDING_LEAKS.slice(1))("runs %s for a provider that allows folding", async (sql) => {
    const agent = await fundedWallet(foldingId);
    const res = await restQuery(agent, foldingId, sql);
    expect(res.statusCode, res.body).toBe(200);
    expect(res.body).toMatch(/s3cr3t-2-value/);
  });

  it("runs folding over unpriced tables", async () => {
    const agent = await fundedWallet(pricedId);
    const res = await restQuery(
      agent,
      pricedId,
      "SELECT string_agg(name, ','), array_agg(id), ARRAY(SELECT id FROM orders), (SELECT name FROM items WHERE id = 1) FROM items",
    );
    expect(res.statusCode, res.body).toBe(200);
  });

  it.each(STATISTICS)("refuses %s with 403 column-statistics", async (sql) => {
    const agent = await fundedWallet(pricedId);
    const res = await restQuery(agent, pricedId, sql);
    expect(res.statusCode, res.body).toBe(403);
    expect(res.json().error).toMatch(/\(column-statistics\)/);
  });

  it("stores and returns the provider's allowance with its pricing", async () => {
    const { providerId, apiKey } = await registerPricedProvider(gateway, providerDb.url, PRICING);
    const set = (payload: Record<string, unknown>) =>
      gateway.app.inject({
        method: "POST",
        url: `/api/providers/${providerId}/pricing`,
        headers: { "x-api-key": apiKey },
        payload: { basePricePer1000Rows: 1, markupMultiplier: 1, ...payload },
      });
    expect((await set({})).json().allowRowFolding).toBe(false);
    expect((await set({ allowRowFolding: true })).json().allowRowFolding).toBe(true);
    expect((await set({})).json().allowRowFolding).toBe(true);
    const bad = await set({ allowRowFolding: "yes" });
    expect(bad.statusCode).toBe(400);
    expect(bad.json().error).toMatch(/allowRowFolding must be true or false/);
  });
});

describe("the wire proxy: a priced table's values leave only at its price", () => {
  async function session(providerId: string): Promise<pg.Client> {
    const agent = await fundedTestAgent(gateway, providerId, FUNDS);
    const client = await connectAgent(proxy, agent, providerId);
    client.on("error", () => {});
    return client;
  }

  async function failure(client: pg.Client, sql: string): Promise<pg.DatabaseError> {
    const error = await client.query(sql).then(
      () => null,
      (e: unknown) => e,
    );
    if (!(error instanceof pg.DatabaseError))
      throw new Error(`${sql}: expected a database error, got ${error}`);
    return error;
  }

  it.each(CAST_LEAKS)("withholds every text field of %s and keeps its SQLSTATE", async (sql) => {
    const client = await session(pricedId);
    try {
      const error = await failure(client, sql);
      expect(error.code).toBe("22P02");
      expect(error.message).toMatch(/SQLSTATE 22P02, data exception\).*withheld.*priced table/);
      expect(JSON.stringify({ ...error, message: error.message })).not.toMatch(/s3cr3t/);
      expect([error.detail, error.hint, error.where, error.position, error.internalQuery]).toEqual([
        undefined,
        undefined,
        undefined,
        undefined,
        undefined,
      ]);
      // The session goes on, and the same statement's text is withheld in the extended protocol too.
      const prepared = await client.query({ text: sql.replace("= 3", "= $1"), values: [3] }).catch((e) => e);
      expect(prepared.code).toBe("22P02");
      expect(prepared.message).not.toMatch(/s3cr3t/);
    } finally {
      await client.end();
    }
  });

  it("keeps the database's text of a statement over unpriced tables", async () => {
    const client = await session(pricedId);
    try {
      const error = await failure(client, "SELECT name::int FROM items WHERE id = 3");
      expect(error.message).toMatch(/invalid input syntax for type integer: "item 3"/);
    } finally {
      await client.end();
    }
  });

  it.each(FOLDING_LEAKS)("refuses %s with 42501 priced-table-folding", async (sql) => {
    const client = await session(pricedId);
    try {
      const error = await failure(client, sql);
      expect(error.code).toBe(SqlState.insufficientPrivilege);
      expect(error.message).toMatch(/\(priced-table-folding\)/);
      const prepared = await client.query({ text: sql, values: [] }).catch((e) => e);
      expect(prepared.code).toBe(SqlState.insufficientPrivilege);
    } finally {
      await client.end();
    }
  });

  it("runs folding for a provider that allows it, and over unpriced tables", async () => {
    const folding = await session(foldingId);
    const priced = await session(pricedId);
    try {
      const { rows } = await folding.query(
        "SELECT string_agg(secret, ',' ORDER BY id) AS s FROM secret_prices",
      );
      expect(rows[0].s.split(",")).toHaveLength(400);
      const unpriced = await priced.query(
        "SELECT string_agg(name, ',') AS s, ARRAY(SELECT id FROM orders) FROM items",
      );
      expect(unpriced.rows).toHaveLength(1);
    } finally {
      await folding.end();
      await priced.end();
    }
  });

  it.each(STATISTICS)("refuses %s with 42501 column-statistics", async (sql) => {
    const client = await session(pricedId);
    try {
      const error = await failure(client, sql);
      expect(error.code).toBe(SqlState.insufficientPrivilege);
      expect(error.message).toMatch(/\(column-statistics\)/);
    } finally {
      await client.end();
    }
  });
});
