import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { costOfRows, priceOf } from "../../src/billing/cost.js";
import { creditDeposit, getBalance, listLedgerEntries } from "../../src/billing/ledger.js";
import { formatMicro } from "../../src/billing/money.js";
import { readGuardCases } from "../../src/guard/guard-cases.js";
import type { TestDatabase } from "../support/database.js";
import { randomTxHash, randomWallet } from "../support/fixtures.js";
import {
  createProviderDatabase,
  registerPricedProvider,
  startTestGateway,
  type TestGateway,
} from "../support/gateway.js";

// Cases for a provider with table prices run against such a provider in test/pricing.
const guardCases = readGuardCases().filter((c) => c.pricedTables === undefined);

let gateway: TestGateway;
let providerDb: TestDatabase;
let providerId: string;
// The guard cases run their allowed writes on a database of their own, so metering tests see fixed data.
let contractDb: TestDatabase;
let contractProviderId: string;
// 1 USDC per 1000 rows, markup 1.5: 1 row costs 1500 micro-USDC
const price = priceOf({ priceMicroPer1000Rows: 1_000_000n, markupPpm: 1_500_000n });

beforeAll(async () => {
  gateway = await startTestGateway({ env: { PGTOLL_STATEMENT_TIMEOUT_MS: "10000", PGTOLL_ROW_CAP: "500" } });
  providerDb = await createProviderDatabase(200);
  ({ providerId } = await registerPricedProvider(gateway, providerDb.url, {
    basePricePer1000Rows: 1,
    markupMultiplier: 1.5,
  }));
  contractDb = await createProviderDatabase(200);
  ({ providerId: contractProviderId } = await registerPricedProvider(gateway, contractDb.url));
});
afterAll(async () => {
  await gateway?.close();
  await providerDb?.drop();
  await contractDb?.drop();
});

async function fundedAgent(amountMicro: bigint, provider = providerId): Promise<string> {
  const agent = randomWallet();
  if (amountMicro > 0n) {
    await creditDeposit(gateway.ctx.db, {
      chainId: 8453,
      txHash: randomTxHash(),
      agentWallet: agent,
      providerId: provider,
      amountMicro,
      blockNumber: 1n,
    });
  }
  return agent;
}

function query(agentWallet: string, sql: string, extra: Record<string, unknown> = {}) {
  return gateway.app.inject({
    method: "POST",
    url: "/api/query",
    payload: { sql, agentWallet, providerId, ...extra },
  });
}

async function itemCount(db = providerDb): Promise<number> {
  const client = new pg.Client({ connectionString: db.url });
  await client.connect();
  const { rows } = await client.query("SELECT count(*)::int AS n FROM items");
  await client.end();
  return rows[0].n;
}

describe("POST /api/query: the guard contract", () => {
  const contractQuery = (agentWallet: string, sql: string, extra: Record<string, unknown> = {}) =>
    gateway.app.inject({
      method: "POST",
      url: "/api/query",
      payload: { sql, agentWallet, providerId: contractProviderId, ...extra },
    });

  it.each(guardCases.filter((c) => c.verdict !== "allow"))("$verdict: $sql", async ({ verdict, sql }) => {
    const agent = await fundedAgent(10_000_000n, contractProviderId);
    const before = await itemCount(contractDb);
    const res = await contractQuery(agent, sql);
    expect(res.statusCode).toBe(verdict === "deny" ? 403 : 400);
    expect(res.json().error).toMatch(verdict === "deny" ? /not allowed/ : /invalid SQL/);
    expect(await itemCount(contractDb)).toBe(before);
    expect((await getBalance(gateway.ctx.db, agent, contractProviderId)).balanceMicro).toBe(10_000_000n);
  });

  it.each(guardCases.filter((c) => c.verdict === "allow"))("allow: $sql", async ({ sql }) => {
    const agent = await fundedAgent(10_000_000n, contractProviderId);
    const res = await contractQuery(agent, sql, /^select \$1/i.test(sql) ? { params: [1] } : {});
    // Allowed means it passed the guard: the only failures left are PostgreSQL's own (e.g. EXECUTE of an
    // unprepared statement, a cursor outside a transaction block: the request runs as psql would run it),
    // answered as 400 "the database refused the statement", never 403.
    expect([200, 400]).toContain(res.statusCode);
    if (res.statusCode === 400) expect(res.json().error).toMatch(/SQLSTATE/);
    if (res.statusCode !== 200 && !/EXECUTE|FETCH|CLOSE|DEALLOCATE|SAVEPOINT|DECLARE/.test(sql))
      throw new Error(`${sql}: ${res.body}`);
  });
});

describe("POST /api/query: a pricing change", () => {
  it("takes the funds an idle session under the old pricing holds for the next request", async () => {
    const db = await createProviderDatabase(5);
    try {
      const pricing = { basePricePer1000Rows: 1, markupMultiplier: 1 };
      const provider = await registerPricedProvider(gateway, db.url, pricing);
      // Three rows' worth: the agent's session holds all of it between its requests.
      const agent = await fundedAgent(3000n, provider.providerId);
      const ask = () =>
        gateway.app.inject({
          method: "POST",
          url: "/api/query",
          payload: {
            sql: "SELECT id FROM items WHERE id = 1",
            agentWallet: agent,
            providerId: provider.providerId,
          },
        });
      expect((await ask()).statusCode).toBe(200);
      const repriced = await gateway.app.inject({
        method: "POST",
        url: `/api/providers/${provider.providerId}/pricing`,
        headers: { "x-api-key": provider.apiKey },
        payload: pricing,
      });
      expect(repriced.statusCode).toBe(200);
      const next = await ask();
      expect(next.statusCode, next.body).toBe(200);
      expect(next.json().actualCost).toBe("0.001000");
      expect((await getBalance(gateway.ctx.db, agent, provider.providerId))?.balanceMicro).toBe(1000n);
    } finally {
      await db.drop();
    }
  });
});

describe("POST /api/query: metering", () => {
  it("returns rows and charges exactly the cost rule, with the SQL and rowCount in the ledger", async () => {
    const agent = await fundedAgent(1_000_000n);
    const res = await query(agent, "SELECT id, name FROM items WHERE id <= 7 ORDER BY id");
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(Object.keys(body).sort()).toEqual([
      "actualCost",
      "estimatedCost",
      "executionTime",
      "rowCount",
      "rows",
    ]);
    expect(body.rowCount).toBe(7);
    expect(body.rows[0]).toEqual({ id: 1, name: "item 1" });
    expect(body.actualCost).toBe(formatMicro(costOfRows(7, price)));
    expect(body.actualCost).toBe("0.010500");
    expect(body.estimatedCost).toMatch(/^\d+\.\d{6}$/);
    expect(body.executionTime).toMatch(/^\d+\.\d{2}ms$/);
    // Charged before the answer.
    const balance = await getBalance(gateway.ctx.db, agent, providerId);
    expect(balance?.balanceMicro).toBe(1_000_000n - 10_500n);
    // The hold goes back once the agent's session has been idle a moment (REST_IDLE_RELEASE_MS).
    await expect
      .poll(async () => (await getBalance(gateway.ctx.db, agent, providerId))?.reservedMicro, {
        timeout: 3000,
      })
      .toBe(0n);
    const [entry] = await listLedgerEntries(gateway.ctx.db, agent, { providerId, limit: 1 });
    expect(entry).toMatchObject({
      type: "query",
      amountMicro: -10_500n,
      metadata: { sql: "SELECT id, name FROM items WHERE id <= 7 ORDER BY id", rowCount: 7 },
    });
  });

  it("counts queries, rows and micro-USDC in /metrics", async () => {
    const read = async () => {
      const text = (await gateway.app.inject({ method: "GET", url: "/metrics" })).body;
      const value = (series: string) =>
        Number(
          text
            .split("\n")
            .find((line) => line.startsWith(`${series} `))
            ?.split(" ")[1] ?? 0,
        );
      return {
        ok: value('pgtoll_queries_total{surface="rest",outcome="ok"}'),
        rows: value('pgtoll_rows_metered_total{surface="rest"}'),
        charged: value('pgtoll_charged_micro_usdc_total{surface="rest"}'),
      };
    };
    const before = await read();
    const agent = await fundedAgent(1_000_000n);
    expect((await query(agent, "SELECT id FROM items WHERE id <= 3")).statusCode).toBe(200);
    expect((await query(agent, "SELECT id FROM items WHERE id <= 2")).statusCode).toBe(200);
    expect(await read()).toEqual({
      ok: before.ok + 2,
      rows: before.rows + 5,
      charged: before.charged + Number(costOfRows(3, price) + costOfRows(2, price)),
    });
  });

  it("estimates from the planner before running", async () => {
    const agent = await fundedAgent(1_000_000n);
    const body = (await query(agent, "SELECT * FROM items")).json();
    expect(body.rowCount).toBe(200);
    expect(body.estimatedCost).not.toBe("0.000000");
  });

  it("charges writes by affected rows", async () => {
    const agent = await fundedAgent(1_000_000n);
    const res = await query(agent, "UPDATE items SET name = name WHERE id <= 4");
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({
      rowCount: 4,
      rows: [],
      actualCost: formatMicro(costOfRows(4, price)),
    });
    const insert = await query(agent, "INSERT INTO orders (item_id) VALUES (1), (2) RETURNING id");
    expect(insert.json()).toMatchObject({ rowCount: 2, actualCost: formatMicro(costOfRows(2, price)) });
  });

  it("charges a multi-statement string for every statement's rows", async () => {
    const agent = await fundedAgent(1_000_000n);
    const body = (await query(agent, "select 1; select 2")).json();
    expect(body.rowCount).toBe(2);
    expect(body.actualCost).toBe(formatMicro(costOfRows(2, price)));
  });

  it("binds params for one statement and refuses them for several", async () => {
    const agent = await fundedAgent(1_000_000n);
    const one = await query(agent, "SELECT name FROM items WHERE id = $1", { params: [3] });
    expect(one.json().rows).toEqual([{ name: "item 3" }]);
    const injection = await query(agent, "SELECT count(*) AS n FROM items WHERE name = $1", {
      params: ["x' OR '1'='1"],
    });
    expect(injection.json().rows).toEqual([{ n: "0" }]);
    const several = await query(agent, "SELECT $1::int; SELECT 2", { params: [1] });
    expect(several.statusCode).toBe(400);
  });

  it("answers 400 naming the mismatch when params has more or fewer values than the statement has placeholders", async () => {
    const agent = await fundedAgent(1_000_000n);
    for (const [sql, params, given, wanted] of [
      ["SELECT name FROM items WHERE id = $1", [1, 2], 2, 1],
      ["SELECT name FROM items WHERE id = $1 OR id = $2", [1], 1, 2],
      ["INSERT INTO items (name) VALUES ($1)", ["a", "b", "c"], 3, 1],
    ] as const) {
      const res = await query(agent, sql, { params });
      expect(res.statusCode, res.body).toBe(400);
      expect(res.json().error).toBe(
        `params has ${given} value${given === 1 ? "" : "s"} but the statement has ${wanted} placeholder${wanted === 1 ? "" : "s"} ($1${wanted > 1 ? ` to $${wanted}` : ""}): give one value per placeholder`,
      );
    }
    // PostgreSQL refused each Bind: charged as any error the database raised, one row (1.5 USDC per 1000).
    expect((await getBalance(gateway.ctx.db, agent, providerId)).balanceMicro).toBe(1_000_000n - 3n * 1500n);
    // the session that saw the refused bind still serves the next request
    expect((await query(agent, "SELECT name FROM items WHERE id = $1", { params: [3] })).statusCode).toBe(
      200,
    );
  });

  it("rolls back a write the balance cannot pay for, uncharged, and cuts a read to the rows it pays for", async () => {
    const agent = await fundedAgent(3000n); // pays for 2 rows
    const before = await itemCount();
    const write = await query(agent, "INSERT INTO items (name) SELECT 'x' FROM generate_series(1, 5)");
    expect(write.statusCode).toBe(402);
    expect(write.json().error).toMatch(/insufficient balance/);
    expect(await itemCount()).toBe(before);
    expect((await getBalance(gateway.ctx.db, agent, providerId)).balanceMicro).toBe(3000n);
    const read = await query(agent, "SELECT id FROM items ORDER BY id LIMIT 3");
    expect(read.statusCode).toBe(200);
    expect(read.json()).toMatchObject({
      rows: [{ id: 1 }, { id: 2 }],
      rowCount: 2,
      actualCost: "0.003000",
      truncated: true,
      stoppedBy: {
        code: "PT402",
        message: expect.stringMatching(/cut off after 2 rows, which were charged/),
      },
    });
    expect((await getBalance(gateway.ctx.db, agent, providerId)).balanceMicro).toBe(0n);
    expect((await query(agent, "SELECT 1")).statusCode).toBe(402);
  });

  it("refuses an agent with no balance before running anything", async () => {
    const agent = await fundedAgent(0n);
    const res = await query(agent, "INSERT INTO items (name) VALUES ('should not exist')");
    expect(res.statusCode).toBe(402);
    const { rows } = await new pg.Pool({ connectionString: providerDb.url, max: 1 }).query(
      "SELECT count(*)::int AS n FROM items WHERE name = 'should not exist'",
    );
    expect(rows[0].n).toBe(0);
  });

  it("answers an agent with no balance when the provider charges nothing, with no ledger entry", async () => {
    const free = await registerPricedProvider(gateway, providerDb.url, {
      basePricePer1000Rows: 0,
      markupMultiplier: 1,
    });
    const agent = await fundedAgent(0n, free.providerId);
    const res = await query(agent, "SELECT id FROM items WHERE id <= 3 ORDER BY id", {
      providerId: free.providerId,
    });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({ rowCount: 3, estimatedCost: "0.000000", actualCost: "0.000000" });
    expect(
      await listLedgerEntries(gateway.ctx.db, agent, { providerId: free.providerId, limit: 10 }),
    ).toEqual([]);
  });

  it("answers a result above the row cap with the rows within it, charged, and says why it stops", async () => {
    const agent = await fundedAgent(100_000_000n);
    const res = await query(agent, "SELECT g FROM generate_series(1, 100000) g");
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(body).toMatchObject({ rowCount: 500, truncated: true, stoppedBy: { code: "result_too_large" } });
    expect(body.rows).toHaveLength(500);
    expect(body.stoppedBy.message).toMatch(/more than 500 rows/);
    // Cut off in the proxy before it relays the next row: what was answered is all that was charged.
    const [entry] = await listLedgerEntries(gateway.ctx.db, agent, { providerId, limit: 1 });
    expect(entry!.metadata.rowCount).toBe(500);
    expect(body.actualCost).toBe("0.750000");
  });

  it("keeps the row cap whatever the agent's SQL sets on its session", async () => {
    const agent = await fundedAgent(100_000_000n);
    for (const sql of [
      "SET pgtoll.max_result_rows = 'none'; SELECT g FROM generate_series(1, 1000) g",
      "SET pgtoll.max_result_rows = 'none'",
      "RESET pgtoll.max_result_bytes",
    ]) {
      const res = await query(agent, sql);
      expect(res.statusCode, res.body).toBe(400);
      expect(res.json().code).toBe("0A000");
    }
    const capped = await query(agent, "SELECT g FROM generate_series(1, 1000) g");
    expect(capped.json()).toMatchObject({
      rowCount: 500,
      truncated: true,
      stoppedBy: { code: "result_too_large" },
    });
  });

  it("returns JSON-safe values", async () => {
    const agent = await fundedAgent(1_000_000n);
    const res = await query(
      agent,
      `SELECT 9007199254740993::int8 AS big, 1.10::numeric AS num, 'NaN'::float8 AS nan, 2.5::float8 AS f,
              '\\x0102'::bytea AS bin, date '2024-02-29' AS d, timestamptz '2024-01-01 12:00:00+00' AS ts,
              interval '1 day 2 hours' AS iv, '{"a":1}'::jsonb AS j, ARRAY[1,2]::int8[] AS arr, true AS b, NULL AS n`,
    );
    expect(res.statusCode).toBe(200);
    expect(res.json().rows[0]).toEqual({
      big: "9007199254740993",
      num: "1.10",
      nan: "NaN",
      f: 2.5,
      bin: "\\x0102",
      d: "2024-02-29",
      ts: expect.stringMatching(/^2024-01-01 12:00:00\+00/),
      iv: "1 day 02:00:00",
      j: { a: 1 },
      arr: ["1", "2"],
      b: true,
      n: null,
    });
  });

  it("maps PostgreSQL errors: 400 for the statement's fault, with the SQLSTATE", async () => {
    const agent = await fundedAgent(1_000_000n);
    const res = await query(agent, "SELECT * FROM no_such_table");
    expect(res.statusCode).toBe(400);
    expect(res.json().error).toMatch(/no_such_table.*42P01/);
    // The database's error text is charged as one row (1.5 micro-USDC a row, rounded up).
    expect((await getBalance(gateway.ctx.db, agent, providerId)).balanceMicro).toBe(
      1_000_000n - costOfRows(1, price),
    );
  });

  it("answers 404 for an unknown provider and 400 for malformed fields", async () => {
    const agent = await fundedAgent(0n);
    const unknown = await gateway.app.inject({
      method: "POST",
      url: "/api/query",
      payload: { sql: "SELECT 1", agentWallet: agent, providerId: "00000000-0000-4000-8000-000000000000" },
    });
    expect(unknown.statusCode).toBe(404);
    for (const payload of [
      { sql: "SELECT 1", agentWallet: "0x12", providerId },
      { sql: "SELECT 1", agentWallet: agent, providerId: "nope" },
      { agentWallet: agent, providerId },
      { sql: 42, agentWallet: agent, providerId },
    ]) {
      const res = await gateway.app.inject({ method: "POST", url: "/api/query", payload });
      expect(res.statusCode).toBe(400);
    }
  });

  it("leaves no session state behind on pooled connections", async () => {
    const agent = await fundedAgent(1_000_000n);
    await query(agent, "SET application_name = 'agent-7'");
    await query(agent, "PREPARE q(int) AS SELECT * FROM items WHERE id = $1");
    for (let i = 0; i < 6; i++) {
      const res = await query(agent, "SELECT current_setting('application_name') AS app");
      expect(res.json().rows[0].app).toBe("pgtoll");
      const prepared = await query(agent, "PREPARE q(int) AS SELECT 1");
      expect(prepared.statusCode, prepared.body).toBe(200);
    }
  });

  it("stops a statement after the 10 s timeout, charges its error as one row, and the sessions stay healthy", async () => {
    const agent = await fundedAgent(1_000_000n);
    const started = Date.now();
    const res = await query(agent, "SELECT pg_sleep(30)");
    const elapsed = Date.now() - started;
    expect(res.statusCode).toBe(500);
    expect(res.json().error).toMatch(/statement timeout/);
    expect(elapsed).toBeGreaterThan(9_000);
    expect(elapsed).toBeLessThan(14_000);
    // As any error the database raised: one row, at 1.5 USDC per 1000.
    expect((await getBalance(gateway.ctx.db, agent, providerId)).balanceMicro).toBe(1_000_000n - 1500n);
    const again = await Promise.all(Array.from({ length: 8 }, () => query(agent, "SELECT 1 AS one")));
    expect(
      again.map((r) => r.statusCode),
      again.map((r) => r.body).join("\n"),
    ).toEqual(Array(8).fill(200));
  }, 30_000);
});
