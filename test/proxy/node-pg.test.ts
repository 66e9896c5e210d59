import pg from "pg";
import Cursor from "pg-cursor";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { costOfRows, priceOf } from "../../src/billing/cost.js";
import { getBalance, listLedgerEntries } from "../../src/billing/ledger.js";
import type { TestDatabase } from "../support/database.js";
import {
  createProviderDatabase,
  registerPricedProvider,
  startTestGateway,
  type TestGateway,
} from "../support/gateway.js";
import { fundedTestAgent, startTestProxy, type TestAgent, type TestProxy } from "../support/proxy.js";
import { shapesCharged } from "../support/real-clients.js";

let gateway: TestGateway;
let proxy: TestProxy;
let providerDb: TestDatabase;
let providerId: string;
const price = priceOf({ priceMicroPer1000Rows: 1_000_000n, markupPpm: 1_000_000n }); // 1000 micro-USDC a row

beforeAll(async () => {
  gateway = await startTestGateway();
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

async function connect(agent: TestAgent, database = providerId): Promise<pg.Client> {
  const client = new pg.Client({
    host: "127.0.0.1",
    port: proxy.port,
    user: agent.wallet,
    database,
    password: await agent.token(),
  });
  await client.connect();
  return client;
}

/** Charges are group-committed; a closed session has written all of them. */
async function closeAndWaitForCharges(client: pg.Client): Promise<void> {
  await client.end();
  await new Promise((r) => setTimeout(r, 50));
  await Promise.all(proxy.ctx.releases);
  await proxy.ctx.chargeWriter.flush();
}

describe("node-postgres through the proxy", () => {
  // node-postgres writes Terminate as soon as end() is called: before its startup packet while still connecting.
  it("connect() and end() at once: the client hears nothing from the proxy, as from PostgreSQL", async () => {
    const agent = await fundedTestAgent(gateway, providerId, 1_000_000n);
    const target = new URL(providerDb.url);
    const servers = {
      proxy: { host: "127.0.0.1", port: proxy.port, user: agent.wallet, database: providerId },
      postgres: {
        host: target.hostname,
        port: Number(target.port),
        user: target.username,
        database: target.pathname.slice(1),
      },
    };
    for (const [server, config] of Object.entries(servers)) {
      for (let i = 0; i < 10; i++) {
        const client = new pg.Client({ ...config, password: await agent.token() });
        const heard: string[] = [];
        client.on("error", (error) => heard.push(`error event: ${error.message}`));
        client.connect().then(
          () => heard.push("connected"),
          (error: Error) => heard.push(`connect rejected: ${error.message}`),
        );
        await client.end();
        await new Promise((r) => setTimeout(r, 50));
        expect({ server, heard }).toEqual({ server, heard: [] });
      }
    }
  });

  it("runs simple and extended queries and charges each statement by the cost rule", async () => {
    const agent = await fundedTestAgent(gateway, providerId, 1_000_000n);
    const client = await connect(agent);
    const simple = await client.query("SELECT id, name FROM items WHERE id <= 5 ORDER BY id");
    expect(simple.rows).toHaveLength(5);
    expect(simple.rows[0]).toEqual({ id: 1, name: "item 1" });
    const extended = await client.query("SELECT name FROM items WHERE id = $1", [7]);
    expect(extended.rows).toEqual([{ name: "item 7" }]);
    const named = await client.query({
      name: "by-id",
      text: "SELECT id FROM items WHERE id < $1",
      values: [4],
    });
    expect(named.rowCount).toBe(3);
    const again = await client.query({
      name: "by-id",
      text: "SELECT id FROM items WHERE id < $1",
      values: [3],
    });
    expect(again.rowCount).toBe(2);
    await closeAndWaitForCharges(client);
    const expected = [5, 1, 3, 2].reduce((sum, n) => sum + costOfRows(n, price), 0n);
    const balance = await getBalance(gateway.ctx.db, agent.wallet, providerId);
    expect(balance).toMatchObject({ balanceMicro: 1_000_000n - expected, reservedMicro: 0n });
    // One entry per charge window (usually one; a slow machine can split the session over two), broken
    // down by statement shape: together they hold each statement once.
    const entries = await listLedgerEntries(gateway.ctx.db, agent.wallet, { providerId, limit: 10 });
    const queries = entries.filter((e) => e.type === "query");
    const summed = queries.reduce<[bigint, number, number]>(
      (sum, e) => [
        sum[0] + e.amountMicro,
        sum[1] + Number(e.metadata.statements),
        sum[2] + Number(e.metadata.rowCount),
      ],
      [0n, 0, 0],
    );
    expect(summed).toEqual([-expected, 4, 11]);
    // Each entry lists its shapes costliest first (equal costs, most calls first); summed over the entries:
    const lines = [...shapesCharged(queries).values()]
      .sort((a, b) => Number(b.costMicro - a.costMicro) || b.calls - a.calls)
      .map((l) => [l.sample, l.calls, l.rows, l.costMicro]);
    for (const entry of queries) {
      const costs = (entry.metadata.shapes as { cost: string }[]).map((line) => Number(line.cost));
      expect(costs).toEqual([...costs].sort((a, b) => b - a));
    }
    expect(lines).toEqual([
      ["SELECT id FROM items WHERE id < $1", 2, 5, costOfRows(3, price) + costOfRows(2, price)],
      ["SELECT id, name FROM items WHERE id <= 5 ORDER BY id", 1, 5, costOfRows(5, price)],
      ["SELECT name FROM items WHERE id = $1", 1, 1, costOfRows(1, price)],
    ]);
  });

  it("its ledger entries say which surface charged them: `proxy` here, `rest` for POST /api/query", async () => {
    const agent = await fundedTestAgent(gateway, providerId, 1_000_000n);
    const rest = await gateway.app.inject({
      method: "POST",
      url: "/api/query",
      payload: { sql: "SELECT id FROM items WHERE id <= 2", agentWallet: agent.wallet, providerId },
    });
    expect(rest.statusCode, rest.body).toBe(200);
    const client = await connect(agent);
    await client.query("SELECT id FROM items WHERE id <= 3");
    await client.query("SELECT name FROM items WHERE id = $1", [1]);
    await closeAndWaitForCharges(client);
    const entries = await listLedgerEntries(gateway.ctx.db, agent.wallet, { providerId, limit: 10 });
    const queries = entries.filter((e) => e.type === "query").reverse();
    // Statements and rows by surface: the proxy's two statements are in one window, or two on a slow machine.
    const bySource = new Map<string, [number, number]>();
    for (const e of queries) {
      const [statements, rows] = bySource.get(String(e.metadata.source)) ?? [0, 0];
      bySource.set(String(e.metadata.source), [
        statements + Number(e.metadata.statements ?? 1),
        rows + Number(e.metadata.rowCount),
      ]);
    }
    expect(queries[0]?.metadata.source).toBe("rest");
    expect([...bySource]).toEqual([
      ["rest", [1, 2]],
      ["proxy", [2, 4]],
    ]);
  });

  it("charges writes by affected rows", async () => {
    const agent = await fundedTestAgent(gateway, providerId, 1_000_000n);
    const client = await connect(agent);
    const updated = await client.query("UPDATE items SET name = name WHERE id <= 6");
    expect(updated.rowCount).toBe(6);
    await closeAndWaitForCharges(client);
    const balance = await getBalance(gateway.ctx.db, agent.wallet, providerId);
    expect(balance.balanceMicro).toBe(1_000_000n - costOfRows(6, price));
  });

  it("reads through cursors, charging the rows fetched", async () => {
    const agent = await fundedTestAgent(gateway, providerId, 1_000_000n);
    const client = await connect(agent);
    const cursor = client.query(new Cursor("SELECT id FROM items ORDER BY id"));
    const first = await cursor.read(10);
    const second = await cursor.read(15);
    expect(first).toHaveLength(10);
    expect(second[0]).toEqual({ id: 11 });
    await cursor.close();
    await closeAndWaitForCharges(client);
    const balance = await getBalance(gateway.ctx.db, agent.wallet, providerId);
    expect(balance.balanceMicro).toBe(1_000_000n - costOfRows(10, price) - costOfRows(15, price));
  });

  it("refuses denied and invalid statements with the right SQLSTATE and stays usable", async () => {
    const agent = await fundedTestAgent(gateway, providerId, 1_000_000n);
    const client = await connect(agent);
    await expect(client.query("DROP TABLE items")).rejects.toMatchObject({
      code: "42501",
      message: expect.stringMatching(/no-drop/),
    });
    await expect(client.query("SELEC 1")).rejects.toMatchObject({ code: "42601" });
    await expect(client.query("DELETE FROM items WHERE $1::int = 1", [1])).rejects.toMatchObject({
      code: "42501",
    });
    expect((await client.query("SELECT 1 AS one")).rows).toEqual([{ one: 1 }]);
    await client.query("BEGIN");
    await expect(client.query("TRUNCATE items")).rejects.toMatchObject({ code: "42501" });
    await expect(client.query("SELECT 1")).rejects.toMatchObject({ code: "25P02" });
    await client.query("ROLLBACK");
    expect((await client.query("SELECT count(*)::int AS n FROM items")).rows[0].n).toBe(300);
    await client.end();
  });

  it("keeps the client's application_name, or its fallback, on the provider's side", async () => {
    const agent = await fundedTestAgent(gateway, providerId, 1_000_000n);
    const check = new pg.Client({ connectionString: providerDb.url });
    await check.connect();
    try {
      for (const [options, expected] of [
        [{ application_name: "agent-report" }, "agent-report"],
        [{ fallback_application_name: "agent-fallback" }, "agent-fallback"],
      ] as const) {
        const client = new pg.Client({
          host: "127.0.0.1",
          port: proxy.port,
          user: agent.wallet,
          database: providerId,
          password: await agent.token(),
          ...options,
        });
        await client.connect();
        const { rows } = await check.query(
          "SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND application_name = $1",
          [expected],
        );
        expect(rows[0].n, expected).toBe(1);
        await client.end();
      }
    } finally {
      await check.end();
    }
  });

  it("refuses a session to an agent that cannot pay a row, before any upstream session, saying how to fund", async () => {
    const { providerId: other, walletAddress: wallet } = await registerPricedProvider(
      gateway,
      providerDb.url,
    );
    for (const funds of [0n, costOfRows(1, price) - 1n]) {
      const agent = await fundedTestAgent(gateway, other, funds);
      const error = await connect(agent, other).catch((e: unknown) => e);
      expect(error).toMatchObject({
        code: "PT402",
        severity: "FATAL",
        message: `insufficient funds: ${funds === 0n ? "0.000000" : "0.000999"} USDC available with provider ${other}; a session needs at least 0.001000 USDC (one row at 1.000000 USDC per 1000 rows)`,
        hint: expect.stringContaining(`the provider's wallet is ${wallet}. POST /api/topup pays a top-up`),
      });
    }
    expect(proxy.ctx.slots.inUse(other)).toBe(0);
    expect(proxy.ctx.slots.waiting(other)).toBe(0);
  });

  it("refuses a write of an agent whose balance is spent before the statement runs", async () => {
    const agent = await fundedTestAgent(gateway, providerId, costOfRows(1, price));
    const client = await connect(agent);
    expect((await client.query("SELECT id FROM items WHERE id = 1")).rowCount).toBe(1);
    await expect(client.query("INSERT INTO items (name) VALUES ('free ride')")).rejects.toMatchObject({
      code: "PT402",
    });
    // Nothing reaches the database unfunded, a SET neither; a ROLLBACK (no data, the way out) does.
    await expect(client.query("SET application_name = 'still here'")).rejects.toMatchObject({
      code: "PT402",
    });
    expect((await client.query("ROLLBACK")).command).toBe("ROLLBACK");
    await client.end();
    const check = new pg.Client({ connectionString: providerDb.url });
    await check.connect();
    expect(
      (await check.query("SELECT count(*)::int AS n FROM items WHERE name = 'free ride'")).rows[0].n,
    ).toBe(0);
    await check.end();
  });

  it("serves every row and write of a provider that charges nothing, to an agent with no balance, with no ledger entry", async () => {
    const free = await registerPricedProvider(gateway, providerDb.url, {
      basePricePer1000Rows: 0,
      markupMultiplier: 1,
    });
    const agent = await fundedTestAgent(gateway, free.providerId, 0n);
    const client = await connect(agent, free.providerId);
    expect((await client.query("SELECT id FROM items ORDER BY id")).rowCount).toBe(300);
    expect((await client.query("SELECT name FROM items WHERE id = $1", [9])).rows).toEqual([
      { name: "item 9" },
    ]);
    expect((await client.query("UPDATE items SET name = name WHERE id <= 2")).rowCount).toBe(2);
    await closeAndWaitForCharges(client);
    expect(
      await listLedgerEntries(gateway.ctx.db, agent.wallet, { providerId: free.providerId, limit: 10 }),
    ).toEqual([]);
  });

  it("cuts a result off when the balance runs out, charges exactly the rows delivered, and stays usable", async () => {
    const agent = await fundedTestAgent(gateway, providerId, 25_500n); // pays for 25 rows
    const client = await connect(agent);
    const error = await client.query("SELECT id FROM items ORDER BY id").catch((e: unknown) => e);
    expect(error).toMatchObject({ code: "PT402", message: expect.stringMatching(/cut off after 25 rows/) });
    // What is left (500) pays for no row: every statement is refused before it runs, the session stays open.
    await expect(client.query("SHOW application_name")).rejects.toMatchObject({ code: "PT402" });
    await expect(client.query("SET application_name = 'after cut-off'")).rejects.toMatchObject({
      code: "PT402",
    });
    expect((await client.query("ROLLBACK")).command).toBe("ROLLBACK");
    await closeAndWaitForCharges(client);
    const balance = await getBalance(gateway.ctx.db, agent.wallet, providerId);
    expect(balance).toMatchObject({ balanceMicro: 25_500n - costOfRows(25, price), reservedMicro: 0n });
    const [entry] = await listLedgerEntries(gateway.ctx.db, agent.wallet, { providerId, limit: 1 });
    expect(entry?.metadata).toMatchObject({
      source: "proxy",
      statements: 1,
      rowCount: 25,
      cutOff: true,
      shapes: [expect.objectContaining({ sample: "SELECT id FROM items ORDER BY id", rows: 25 })],
    });
  });

  it("wrong token: 28P01; wrong user or database: a clear FATAL", async () => {
    const agent = await fundedTestAgent(gateway, providerId, 1_000n);
    const other = await fundedTestAgent(gateway, providerId, 1_000n);
    const attempt = async (config: pg.ClientConfig) => {
      const client = new pg.Client({ host: "127.0.0.1", port: proxy.port, ...config });
      client.on("error", () => {});
      return client.connect().then(
        async () => {
          await client.end();
          return null;
        },
        (e: unknown) => e,
      );
    };
    expect(
      await attempt({ user: agent.wallet, database: providerId, password: await other.token() }),
    ).toMatchObject({ code: "28P01" });
    expect(await attempt({ user: agent.wallet, database: providerId, password: "hunter2" })).toMatchObject({
      code: "28P01",
    });
    expect(await attempt({ user: "alice", database: providerId, password: "x" })).toMatchObject({
      code: "28000",
    });
    expect(await attempt({ user: agent.wallet, database: "postgres", password: "x" })).toMatchObject({
      code: "3D000",
    });
    expect(
      await attempt({
        user: agent.wallet,
        database: providerId,
        password: await agent.token(),
        options: "-c statement_timeout=0",
      }),
    ).toMatchObject({ code: "42501" });
    expect(
      await attempt({
        user: agent.wallet,
        database: "00000000-0000-4000-8000-000000000000",
        password: await agent.token(),
      }),
    ).toMatchObject({
      code: "28P01",
    });
  });

  it("exports its metrics at /metrics", async () => {
    const agent = await fundedTestAgent(gateway, providerId, 1_000_000n);
    const client = await connect(agent);
    await client.query("SELECT id FROM items WHERE id <= 3");
    await client.query("DROP TABLE items").catch(() => {});
    await closeAndWaitForCharges(client);
    const body = (await gateway.app.inject({ method: "GET", url: "/metrics" })).body;
    const value = (pattern: RegExp) => Number(pattern.exec(body)?.[1] ?? Number.NaN);
    expect(value(/^pgtoll_proxy_sessions_total (\d+)/m)).toBeGreaterThan(0);
    expect(value(/^pgtoll_proxy_sessions_active (\d+)/m)).toBe(0);
    expect(value(/^pgtoll_proxy_statements_total\{verdict="allow"\} (\d+)/m)).toBeGreaterThan(0);
    expect(value(/^pgtoll_proxy_statements_total\{verdict="deny"\} (\d+)/m)).toBeGreaterThan(0);
    expect(value(/^pgtoll_proxy_rows_relayed_total (\d+)/m)).toBeGreaterThanOrEqual(3);
    expect(
      value(/^pgtoll_proxy_bytes_relayed_total\{direction="upstream_to_client"\} (\d+)/m),
    ).toBeGreaterThan(0);
    expect(value(/^pgtoll_proxy_charged_micro_usdc_total (\d+)/m)).toBeGreaterThan(0);
    expect(value(/^pgtoll_proxy_sessions_refused_total\{reason="bad_token"\} (\d+)/m)).toBeGreaterThan(0);
    expect(body).toMatch(/^pgtoll_proxy_upstream_latency_seconds_count \d+/m);
  });
});
