import { execFile } from "node:child_process";
import { promisify } from "node:util";
import postgres from "postgres";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { getBalance } from "../../src/billing/ledger.js";
import { parseMicro } from "../../src/billing/money.js";
import type { TestDatabase } from "../support/database.js";
import {
  createProviderDatabase,
  registerPricedProvider,
  startTestGateway,
  type TestGateway,
} from "../support/gateway.js";
import { connectAgent, fundedTestAgent, startTestProxy, type TestProxy } from "../support/proxy.js";

const run = promisify(execFile);

let gateway: TestGateway;
let proxy: TestProxy;
let providerDb: TestDatabase;
let providerId: string;
let providerWallet: string;
/** Bytes the proxy has read from providers' databases: unchanged when the proxy answered alone. */
function bytesFromUpstream(): number {
  return proxy.ctx.metrics.tally.bytesFromUpstream;
}

beforeAll(async () => {
  gateway = await startTestGateway();
  proxy = await startTestProxy(gateway);
  providerDb = await createProviderDatabase(300);
  ({ providerId, walletAddress: providerWallet } = await registerPricedProvider(gateway, providerDb.url, {
    basePricePer1000Rows: 1,
    markupMultiplier: 1.5,
  }));
});
afterAll(async () => {
  await proxy?.close();
  await gateway?.close();
  await providerDb?.drop();
});

describe("SHOW pgtoll.*: the agent asks the proxy what it spends", () => {
  it("answers balance, session cost and price in the simple protocol, free and without the provider's database", async () => {
    const agent = await fundedTestAgent(gateway, providerId, 1_000_000n);
    const client = await connectAgent(proxy, agent, providerId);
    try {
      expect((await client.query("SHOW pgtoll.session_cost")).rows).toEqual([
        { "pgtoll.session_cost": "0.000000" },
      ]);
      await client.query("SELECT id FROM items WHERE id <= 10");
      await client.query("SELECT id FROM items WHERE id <= 4");
      // 14 rows at 1 USDC per 1000 rows with a markup of 1.5: 1500 micro-USDC a row.
      const before = bytesFromUpstream();
      const cost = await client.query("SHOW pgtoll.session_cost");
      expect(cost.rows).toEqual([{ "pgtoll.session_cost": "0.021000" }]);
      expect(cost.command).toBe("SHOW");
      expect((await client.query("show PGTOLL.PRICE")).rows).toEqual([{ "pgtoll.price": "1.500000" }]);
      const depositAddress = await client.query("SHOW pgtoll.deposit_address");
      expect(depositAddress.rows[0]["pgtoll.deposit_address"]).toBe(providerWallet);
      // The balance has this session's open window written first: it matches the ledger exactly.
      const balance = await client.query("SHOW pgtoll.balance");
      expect(balance.rows).toEqual([{ "pgtoll.balance": "0.979000" }]);
      expect(await getBalance(gateway.ctx.db, agent.wallet, providerId)).toMatchObject({
        balanceMicro: 979_000n,
      });
      expect(bytesFromUpstream()).toBe(before);
      // Asking cost nothing.
      expect((await client.query("SHOW pgtoll.session_cost")).rows[0]["pgtoll.session_cost"]).toBe(
        "0.021000",
      );
    } finally {
      await client.end();
    }
  });

  it("answers an agent whose balance is spent, inside a transaction block, keeping the block's status", async () => {
    const agent = await fundedTestAgent(gateway, providerId, 1500n); // one row
    const client = await connectAgent(proxy, agent, providerId);
    try {
      await client.query("BEGIN");
      expect((await client.query("SELECT id FROM items WHERE id = 1")).rows).toEqual([{ id: 1 }]);
      expect((await client.query("SHOW pgtoll.balance")).rows).toEqual([{ "pgtoll.balance": "0.000000" }]);
      await expect(client.query("SELECT id FROM items WHERE id <= 3")).rejects.toMatchObject({
        code: "PT402",
      });
      await client.query("ROLLBACK");
      expect((await client.query("SHOW pgtoll.session_cost")).rows).toEqual([
        { "pgtoll.session_cost": "0.001500" },
      ]);
    } finally {
      await client.end();
    }
  });

  it("answers in the extended protocol: unnamed, named and prepared once then reused, with node-postgres", async () => {
    const agent = await fundedTestAgent(gateway, providerId, 1_000_000n);
    const client = await connectAgent(proxy, agent, providerId);
    try {
      await client.query("SELECT id FROM items WHERE id <= 2");
      expect((await client.query({ text: "SHOW pgtoll.session_cost", values: [] })).rows).toEqual([
        { "pgtoll.session_cost": "0.003000" },
      ]);
      const named = { name: "spent", text: "SHOW pgtoll.session_cost" };
      expect((await client.query(named)).rows[0]["pgtoll.session_cost"]).toBe("0.003000");
      await client.query({ text: "SELECT id FROM items WHERE id <= $1", values: [2] });
      expect((await client.query(named)).rows[0]["pgtoll.session_cost"]).toBe("0.006000");
      expect((await client.query({ text: "SHOW pgtoll.balance", values: [] })).rows).toEqual([
        { "pgtoll.balance": "0.994000" },
      ]);
    } finally {
      await client.end();
    }
  });

  it("keeps its place among pipelined statements (postgres.js pipelines and prepares)", async () => {
    const agent = await fundedTestAgent(gateway, providerId, 1_000_000n);
    const sql = postgres({
      host: "127.0.0.1",
      port: proxy.port,
      user: agent.wallet,
      database: providerId,
      password: await agent.token(),
      max: 1,
      onnotice: () => {},
    });
    const micro = (rows: Record<string, string>[]) =>
      parseMicro(rows[0]?.["pgtoll.session_cost"] ?? "") ?? -1n;
    try {
      // postgres.js reads the catalog's types when it connects: that is charged too, so costs are counted from here.
      const base = micro(await sql`SHOW pgtoll.session_cost`);
      const [a, shown, b, again] = await Promise.all([
        sql`SELECT id FROM items WHERE id <= ${4}`,
        sql`SHOW pgtoll.session_cost`,
        sql`SELECT id FROM items WHERE id <= ${2}`,
        sql.unsafe("SHOW pgtoll.session_cost"),
      ]);
      expect(a).toHaveLength(4);
      expect(b).toHaveLength(2);
      expect(micro(shown) - base).toBe(6000n);
      expect(micro(again) - base).toBe(9000n);
    } finally {
      await sql.end();
    }
  });

  it("refuses an unknown pgtoll setting as PostgreSQL would, and one mixed with other statements", async () => {
    const agent = await fundedTestAgent(gateway, providerId, 1_000_000n);
    const client = await connectAgent(proxy, agent, providerId);
    try {
      await expect(client.query("SHOW pgtoll.nothing")).rejects.toMatchObject({
        code: "42704",
        message: 'unrecognized configuration parameter "pgtoll.nothing"',
      });
      await expect(client.query("SELECT 1; SHOW pgtoll.balance")).rejects.toMatchObject({ code: "0A000" });
      await expect(client.query({ text: "SHOW pgtoll.nothing", values: [] })).rejects.toMatchObject({
        code: "42704",
      });
      expect((await client.query("SHOW pgtoll.price")).rows).toEqual([{ "pgtoll.price": "1.500000" }]);
    } finally {
      await client.end();
    }
  });

  it("works from psql, the way an agent with only a SQL tool asks", async () => {
    const agent = await fundedTestAgent(gateway, providerId, 2_000_000n);
    const { stdout } = await run(
      "psql",
      [
        "-X",
        "-A",
        "-t",
        "-c",
        "SELECT id FROM items WHERE id <= 3",
        "-c",
        "SHOW pgtoll.session_cost",
        "-c",
        "SHOW pgtoll.balance",
        `postgresql://${agent.wallet}@127.0.0.1:${proxy.port}/${providerId}`,
      ],
      { env: { ...process.env, PGPASSWORD: await agent.token() } },
    );
    expect(stdout.trim().split("\n")).toEqual(["1", "2", "3", "0.004500", "1.995500"]);
  });
});
