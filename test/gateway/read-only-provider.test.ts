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
  "SET transaction_read_only = off",
  "SET SESSION CHARACTERISTICS AS TRANSACTION READ WRITE",
];

describe("pricing readOnly", () => {
  it("is false at first, set by true, kept when omitted, cleared by false, and must be a boolean", async () => {
    expect((await setPricing({})).json().readOnly).toBe(false);
    expect((await setPricing({ readOnly: true })).json().readOnly).toBe(true);
    expect((await setPricing({})).json().readOnly).toBe(true);
    const bad = await setPricing({ readOnly: "yes" });
    expect(bad.statusCode).toBe(400);
    expect(bad.json().error).toMatch(/readOnly must be boolean/);
    expect((await setPricing({ readOnly: false })).json().readOnly).toBe(false);
  });
});

describe("a read-only provider", () => {
  beforeAll(async () => {
    expect((await setPricing({ readOnly: true })).statusCode).toBe(200);
  });

  it("serves and charges reads through POST /api/query, and PostgreSQL refuses its writes (403, 25006), uncharged", async () => {
    const agent = await fundedTestAgent(gateway, providerId, 1_000_000n);
    const read = await rest(agent, "SELECT id FROM items WHERE id <= 3 ORDER BY id");
    expect(read.status).toBe(200);
    expect(read.body.rows).toHaveLength(3);
    const after = (await getBalance(gateway.ctx.db, agent.wallet, providerId))!.balanceMicro;
    expect(after).toBe(1_000_000n - 3_000n);
    for (const sql of writes) {
      const { status, body } = await rest(agent, sql);
      expect(status, sql).toBe(403);
      expect(body.code, sql).toBe("25006");
      expect(body.error, sql).toMatch(/read-only transaction/);
    }
    for (const sql of switches) {
      const { status, body } = await rest(agent, sql);
      expect(status, sql).toBe(403);
      expect(body.error, sql).toMatch(/read-only-session/);
    }
    expect(await itemCount()).toBe(10);
    expect((await getBalance(gateway.ctx.db, agent.wallet, providerId))!.balanceMicro).toBe(after);
  });

  it("refuses writes through the wire proxy with 25006 and stays usable", async () => {
    const agent = await fundedTestAgent(gateway, providerId, 1_000_000n);
    const client = await session(agent);
    try {
      for (const sql of writes) await expect(client.query(sql), sql).rejects.toMatchObject({ code: "25006" });
      for (const sql of switches)
        await expect(client.query(sql), sql).rejects.toMatchObject({
          code: "42501",
          message: expect.stringContaining("this session is read-only"),
        });
      expect((await client.query("SHOW default_transaction_read_only")).rows).toEqual([
        { default_transaction_read_only: "on" },
      ]);
      expect((await client.query("SELECT count(*)::int AS n FROM items")).rows).toEqual([{ n: 10 }]);
    } finally {
      await client.end();
    }
    expect(await itemCount()).toBe(10);
  });

  it("refuses a startup option that would make the session read-write", async () => {
    const agent = await fundedTestAgent(gateway, providerId, 1_000_000n);
    await expect(session(agent, "-c transaction_read_only=off")).rejects.toMatchObject({
      code: "25006",
      message: expect.stringMatching(/read-only/),
    });
  });

  it("writes again once the provider is no longer read-only, on new sessions and requests", async () => {
    expect((await setPricing({ readOnly: false })).json().readOnly).toBe(false);
    const agent = await fundedTestAgent(gateway, providerId, 1_000_000n);
    expect((await rest(agent, "INSERT INTO items (name) VALUES ('rest')")).status).toBe(200);
    const client = await session(agent);
    try {
      await client.query("INSERT INTO items (name) VALUES ('proxy')");
    } finally {
      await client.end();
    }
    expect(await itemCount()).toBe(12);
  });
});
