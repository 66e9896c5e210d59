import type pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { getBalance } from "../../src/billing/ledger.js";
import { type OwnedTestDatabase, runSql } from "../support/database.js";
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

let gateway: TestGateway;
let proxy: TestProxy;
let providerDb: OwnedTestDatabase;
let providerId: string;
let apiKey: string;

beforeAll(async () => {
  gateway = await startTestGateway();
  proxy = await startTestProxy(gateway);
  providerDb = await createProviderDatabase(10);
  ({ providerId, apiKey } = await registerPricedProvider(gateway, providerDb.url));
});
afterAll(async () => {
  await proxy?.close();
  await gateway?.close();
  await providerDb?.drop();
});

function setPricing(body: Record<string, unknown>) {
  return gateway.app.inject({
    method: "POST",
    url: `/api/providers/${providerId}/pricing`,
    headers: { "x-api-key": apiKey },
    payload: { basePricePer1000Rows: 1, markupMultiplier: 1, ...body },
  });
}

async function rest(agent: TestAgent, sql: string) {
  const res = await gateway.app.inject({
    method: "POST",
    url: "/api/query",
    payload: { sql, agentWallet: agent.wallet, providerId },
  });
  return { status: res.statusCode, body: res.json() as { error?: string; code?: string; rows?: unknown[] } };
}

function session(agent: TestAgent, options?: string): Promise<pg.Client> {
  return connectAgent(proxy, agent, providerId, options ? { options } : {});
}

/** Charges are group-committed; once the session has ended and they are written they are all in the ledger. */
async function endAndWaitForCharges(client: pg.Client): Promise<void> {
  await client.end();
  await new Promise((resolve) => setTimeout(resolve, 50));
  await Promise.all(proxy.ctx.releases);
  await proxy.ctx.chargeWriter.flush();
}

async function balanceOf(agent: TestAgent): Promise<bigint> {
  return (await getBalance(gateway.ctx.db, agent.wallet, providerId))!.balanceMicro;
}

/** The table's rows and its sequence, as the superuser sees them: what a refused write must leave alone. */
async function providerData(): Promise<string> {
  const [row] = await runSql<{ data: string }>(
    `SELECT (SELECT json_agg(i ORDER BY id) FROM items i)::text || ' ' || last_value || ' ' || is_called AS data
       FROM items_id_seq`,
    providerDb.adminUrl,
  );
  return row!.data;
}

async function itemCount(): Promise<number> {
  const [row] = await runSql<{ n: number }>("SELECT count(*)::int AS n FROM items", providerDb.adminUrl);
  return row!.n;
}

const writes = [
  "INSERT INTO items (name) VALUES ('new')",
  "UPDATE items SET name = 'changed' WHERE id = 1",
  "DELETE FROM items WHERE id = 1",
  "SELECT nextval('items_id_seq')",
];
const switches = [
  "BEGIN READ WRITE",
  "START TRANSACTION READ WRITE",
  "SET transaction_read_only = off",
  "SET LOCAL transaction_read_only TO false",
  "SET SESSION CHARACTERISTICS AS TRANSACTION READ WRITE",
];

describe("pricing readOnly", () => {
  it("is false at first, set by true, kept when omitted, cleared by false, and must be a boolean", async () => {
    expect((await setPricing({})).json().readOnly).toBe(false);
    expect((await setPricing({ readOnly: true })).json().readOnly).toBe(true);
    const omitted = await setPricing({ basePricePer1000Rows: 2 });
    expect(omitted.json()).toMatchObject({ basePricePer1000Rows: 2, readOnly: true });
    for (const readOnly of ["yes", "true", 1, 0, null, {}]) {
      const bad = await setPricing({ readOnly });
      expect(bad.statusCode, JSON.stringify(readOnly)).toBe(400);
      expect(bad.json(), JSON.stringify(readOnly)).toEqual({
        error: "invalid pricing: readOnly must be true or false",
      });
    }
    expect((await setPricing({})).json()).toMatchObject({ basePricePer1000Rows: 1, readOnly: true });
    expect((await setPricing({ readOnly: false })).json().readOnly).toBe(false);
    expect((await setPricing({})).json().readOnly).toBe(false);
  });
});

describe("a read-only provider", () => {
  beforeAll(async () => {
    expect((await setPricing({ readOnly: true })).statusCode).toBe(200);
  });

  it("serves and charges reads through POST /api/query; PostgreSQL refuses its writes (25006), each error charged as a row", async () => {
    const before = await providerData();
    const agent = await fundedTestAgent(gateway, providerId, 1_000_000n);
    const read = await rest(agent, "SELECT id FROM items WHERE id <= 3 ORDER BY id");
    expect(read.status).toBe(200);
    expect(read.body.rows).toHaveLength(3);
    const after = await balanceOf(agent);
    expect(after).toBe(1_000_000n - 3_000n);
    // The pooled session is then reset (DISCARD ALL): read-only is its connect-time value, so it stays.
    expect((await rest(agent, "SET application_name = 'agent'")).status).toBe(200);
    let refusedByDatabase = 0;
    for (const sql of [
      ...writes,
      "UPDATE items SET name = 'a' WHERE id = 3; DELETE FROM items WHERE id = 4",
    ]) {
      const { status, body } = await rest(agent, sql);
      // Which 4xx is query-errors.ts's business; that it is PostgreSQL's read-only refusal is this feature's.
      expect(status, sql).toBeGreaterThanOrEqual(400);
      expect(status, sql).toBeLessThan(500);
      expect(body.error, sql).toMatch(/read-only/);
      if ("code" in body) {
        expect(body.code, sql).toBe("25006");
        refusedByDatabase++;
      }
    }
    expect(refusedByDatabase).toBeGreaterThan(0);
    for (const sql of switches) {
      const { status, body } = await rest(agent, sql);
      expect(status, sql).toBe(403);
      expect(body.error, sql).toMatch(/read-only-session/);
    }
    expect(await providerData()).toBe(before);
    // The database's error text is charged as one row; the guard's refusals are free.
    expect(await balanceOf(agent)).toBe(after - BigInt(refusedByDatabase) * 1_000n);
  });

  it("serves and charges reads through the wire proxy; writes are refused with 25006, their error charged as a row", async () => {
    const before = await providerData();
    const agent = await fundedTestAgent(gateway, providerId, 1_000_000n);
    const client = await session(agent);
    expect((await client.query("SELECT id FROM items WHERE id <= 3 ORDER BY id")).rows).toHaveLength(3);
    for (const sql of writes) await expect(client.query(sql), sql).rejects.toMatchObject({ code: "25006" });
    await expect(client.query("INSERT INTO items (name) VALUES ($1)", ["extended"])).rejects.toMatchObject({
      code: "25006",
    });
    // A plain BEGIN opens a read-only transaction: the default is what the session started with.
    await client.query("BEGIN");
    await expect(client.query("DELETE FROM items WHERE id = 2")).rejects.toMatchObject({ code: "25006" });
    await client.query("ROLLBACK");
    for (const sql of switches)
      await expect(client.query(sql), sql).rejects.toMatchObject({
        code: "42501",
        message: expect.stringContaining("read-only"),
      });
    expect((await client.query("SHOW default_transaction_read_only")).rows).toEqual([
      { default_transaction_read_only: "on" },
    ]);
    // Still usable after every refusal.
    expect((await client.query("SELECT count(*)::int AS n FROM items")).rows).toEqual([{ n: 10 }]);
    await endAndWaitForCharges(client);
    expect(await providerData()).toBe(before);
    // Three rows, SHOW's one and the count's one, and one for each error the database sent (six 25006s);
    // nothing for the statements pgtoll refused itself.
    expect(await balanceOf(agent)).toBe(1_000_000n - 5_000n - 6_000n);
  });

  it("refuses a startup option that would make the session read-write", async () => {
    const agent = await fundedTestAgent(gateway, providerId, 1_000_000n);
    await expect(session(agent, "-c transaction_read_only=off")).rejects.toMatchObject({
      code: "25006",
      message: expect.stringMatching(/read-only/),
    });
    // Not settable at connect by any agent, read-only provider or not.
    await expect(session(agent, "-c default_transaction_read_only=off")).rejects.toMatchObject({
      code: "42501",
    });
    // Asking for read-only is no reason to refuse.
    const client = await session(agent, "-c transaction_read_only=on");
    try {
      await expect(client.query("DELETE FROM items WHERE id = 1")).rejects.toMatchObject({ code: "25006" });
    } finally {
      await client.end();
    }
  });

  it("writes again once the provider is no longer read-only, on new sessions and requests", async () => {
    const agent = await fundedTestAgent(gateway, providerId, 1_000_000n);
    // Another wallet: each session reserves what one agent's whole balance would be here.
    const earlier = await session(await fundedTestAgent(gateway, providerId, 1_000_000n));
    try {
      expect((await setPricing({ readOnly: false })).json().readOnly).toBe(false);
      expect((await rest(agent, "INSERT INTO items (name) VALUES ('rest')")).status).toBe(200);
      const client = await session(agent);
      try {
        await client.query("INSERT INTO items (name) VALUES ('proxy')");
        await client.query("UPDATE items SET name = 'changed' WHERE id = 1");
      } finally {
        await client.end();
      }
      // A session keeps the mode it started with.
      await expect(earlier.query("INSERT INTO items (name) VALUES ('earlier')")).rejects.toMatchObject({
        code: "25006",
      });
    } finally {
      await earlier.end();
    }
    expect(await itemCount()).toBe(12);
    const [first] = await runSql<{ name: string }>(
      "SELECT name FROM items WHERE id = 1",
      providerDb.adminUrl,
    );
    expect(first!.name).toBe("changed");
    // And back: the REST pool of the read-only mode serves the provider again.
    expect((await setPricing({ readOnly: true })).json().readOnly).toBe(true);
    const refused = await rest(agent, "DELETE FROM items WHERE id = 1");
    expect(refused.body.error).toMatch(/read-only/);
    expect(await itemCount()).toBe(12);
  });
});
