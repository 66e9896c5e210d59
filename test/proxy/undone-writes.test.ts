import { randomBytes } from "node:crypto";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { getBalance, listLedgerEntries } from "../../src/billing/ledger.js";
import { SqlState } from "../../src/db/sql-state.js";
import { FrontendCode } from "../../src/proxy/message-codes.js";
import { encodeFrame } from "../../src/proxy/serializer.js";
import type { TestDatabase } from "../support/database.js";
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
import { waitForCharges } from "../support/real-clients.js";
import { errorOf, frontend, WireClient } from "../support/wire-client.js";

let gateway: TestGateway;
let proxy: TestProxy;
let providerDb: TestDatabase;
let providerId: string;

/** 1 USDC per 1000 rows: a row costs 1000 micro-USDC. */
const ROW = 1000n;

beforeAll(async () => {
  gateway = await startTestGateway();
  proxy = await startTestProxy(gateway);
  providerDb = await createProviderDatabase(50);
  ({ providerId } = await registerPricedProvider(gateway, providerDb.url, {
    basePricePer1000Rows: 1,
    markupMultiplier: 1,
    maxRowsWrittenPerStatement: 100,
  }));
});
afterAll(async () => {
  await proxy?.close();
  await gateway?.close();
  await providerDb?.drop();
});

/** `count` INSERTs of one row each, named `tag`, as one simple query. */
function inserts(tag: string, count: number): string {
  return Array.from({ length: count }, (_, i) => `INSERT INTO items (name) VALUES ('${tag}-${i}')`).join(
    "; ",
  );
}

async function rowsNamed(tag: string): Promise<number> {
  const check = new pg.Client({ connectionString: providerDb.url });
  await check.connect();
  try {
    const { rows } = await check.query("SELECT count(*)::int AS n FROM items WHERE name LIKE $1", [
      `${tag}-%`,
    ]);
    return rows[0].n;
  } finally {
    await check.end();
  }
}

/** The agent's query entries and balance once every charge of its ended sessions is written. */
async function ledgerOf(agent: TestAgent) {
  await waitForCharges(proxy);
  const entries = await listLedgerEntries(gateway.ctx.db, agent.wallet, { providerId, limit: 1000 });
  const queries = entries.filter((entry) => entry.type === "query");
  return {
    charged: queries.reduce((total, entry) => total - entry.amountMicro, 0n),
    balance: (await getBalance(gateway.ctx.db, agent.wallet, providerId)).balanceMicro,
  };
}

describe("writes pgtoll rolls back", () => {
  it("are not charged: twenty INSERTs in one query, with funds for two and a half", async () => {
    const funds = (5n * ROW) / 2n;
    const agent = await fundedTestAgent(gateway, providerId, funds);
    const tag = `undone-${randomBytes(4).toString("hex")}`;
    const client = await connectAgent(proxy, agent, providerId);
    const failure = await client.query(inserts(tag, 20)).catch((error: pg.DatabaseError) => error);
    expect((failure as pg.DatabaseError).code).toBe(SqlState.insufficientFunds);
    await client.end();
    expect(await rowsNamed(tag)).toBe(0);
    expect(await ledgerOf(agent)).toEqual({ charged: 0n, balance: funds });
  });

  it("charge the rows a read of the same query delivered, and no write", async () => {
    const funds = (9n * ROW) / 2n;
    const agent = await fundedTestAgent(gateway, providerId, funds);
    const tag = `undone-${randomBytes(4).toString("hex")}`;
    const client = await connectAgent(proxy, agent, providerId);
    const failure = await client
      .query(`SELECT id FROM items WHERE id <= 2; ${inserts(tag, 20)}`)
      .catch((error: pg.DatabaseError) => error);
    expect((failure as pg.DatabaseError).code).toBe(SqlState.insufficientFunds);
    // The session goes on with what the undone writes gave back.
    expect((await client.query("SELECT id FROM items WHERE id <= 2")).rowCount).toBe(2);
    await client.end();
    expect(await rowsNamed(tag)).toBe(0);
    expect(await ledgerOf(agent)).toEqual({ charged: 4n * ROW, balance: funds - 4n * ROW });
  });

  it("are charged once committed, as the query's writes commit", async () => {
    const agent = await fundedTestAgent(gateway, providerId, 100n * ROW);
    const tag = `kept-${randomBytes(4).toString("hex")}`;
    const client = await connectAgent(proxy, agent, providerId);
    await client.query(inserts(tag, 3));
    await client.end();
    expect(await rowsNamed(tag)).toBe(3);
    expect(await ledgerOf(agent)).toEqual({ charged: 3n * ROW, balance: 97n * ROW });
  });

  it("are not charged when the rows-written cap undoes the query", async () => {
    const agent = await fundedTestAgent(gateway, providerId, 1000n * ROW);
    const tag = `capped-${randomBytes(4).toString("hex")}`;
    const client = await connectAgent(proxy, agent, providerId);
    const many = Array.from({ length: 200 }, (_, i) => `('${tag}-m${i}')`).join(", ");
    const failure = await client
      .query(`${inserts(tag, 2)}; INSERT INTO items (name) VALUES ${many}`)
      .catch((error: pg.DatabaseError) => error);
    expect((failure as pg.DatabaseError).message).toMatch(/100/);
    await client.end();
    expect(await rowsNamed(tag)).toBe(0);
    expect(await ledgerOf(agent)).toEqual({ charged: 0n, balance: 1000n * ROW });
  });

  it("are not charged on the REST path either: the request's transaction is rolled back, uncharged", async () => {
    const funds = (5n * ROW) / 2n;
    const agent = await fundedTestAgent(gateway, providerId, funds);
    const tag = `undone-rest-${randomBytes(4).toString("hex")}`;
    const response = await gateway.app.inject({
      method: "POST",
      url: "/api/query",
      payload: { sql: inserts(tag, 20), agentWallet: agent.wallet, providerId },
    });
    expect(response.statusCode, response.body).toBe(402);
    expect(await rowsNamed(tag)).toBe(0);
    expect(await ledgerOf(agent)).toEqual({ charged: 0n, balance: funds });
  });

  it("are not charged when Executes pipelined before one Sync are rolled back together", async () => {
    const funds = (5n * ROW) / 2n;
    const agent = await fundedTestAgent(gateway, providerId, funds);
    const tag = `undone-ext-${randomBytes(4).toString("hex")}`;
    const client = await WireClient.connect(proxy.port);
    await client.login({ user: agent.wallet, database: providerId }, await agent.token());
    const executes = Array.from({ length: 20 }, (_, i) =>
      Buffer.concat([frontend.bind("", "insert", [`${tag}-${i}`]), frontend.execute("")]),
    );
    client.send(
      Buffer.concat([
        frontend.parse("insert", "INSERT INTO items (name) VALUES ($1)"),
        ...executes,
        encodeFrame(FrontendCode.Sync),
      ]),
    );
    const answers = await client.until("Z");
    const error = answers.find((message) => message.type === "E");
    expect(error && errorOf(error).code).toBe(SqlState.insufficientFunds);
    // The implicit transaction of the Sync was rolled back with the write that could not be paid.
    expect(answers.at(-1)!.payload.toString()).toBe("I");
    client.destroy();
    expect(await rowsNamed(tag)).toBe(0);
    expect(await ledgerOf(agent)).toEqual({ charged: 0n, balance: funds });
  });

  it("are charged when pipelined Executes commit at their Sync, or past a COMMIT among them", async () => {
    const agent = await fundedTestAgent(gateway, providerId, 100n * ROW);
    const tag = `kept-ext-${randomBytes(4).toString("hex")}`;
    const client = await WireClient.connect(proxy.port);
    await client.login({ user: agent.wallet, database: providerId }, await agent.token());
    const insert = (i: number) =>
      Buffer.concat([frontend.bind("", "insert", [`${tag}-${i}`]), frontend.execute("")]);
    const run = (sql: string) =>
      Buffer.concat([frontend.parse("", sql), frontend.bind("", ""), frontend.execute("")]);
    client.send(
      Buffer.concat([
        frontend.parse("insert", "INSERT INTO items (name) VALUES ($1)"),
        insert(0),
        insert(1),
        encodeFrame(FrontendCode.Sync),
      ]),
    );
    await client.until("Z");
    // BEGIN, a write, COMMIT, then a statement that fails: the first write stays, and is charged.
    client.send(
      Buffer.concat([
        run("BEGIN"),
        insert(2),
        run("COMMIT"),
        run("SELECT 1/0"),
        encodeFrame(FrontendCode.Sync),
      ]),
    );
    await client.until("Z");
    client.destroy();
    expect(await rowsNamed(tag)).toBe(3);
    const { charged } = await ledgerOf(agent);
    // Three rows written; the failed division's error is charged as a row.
    expect(charged).toBe(4n * ROW);
  });

  it("are charged when committed by a Sync whose client left before its answer", async () => {
    // Each session holds 1000 rows' worth until its hold is given back after it ends.
    const agent = await fundedTestAgent(gateway, providerId, 20_000n * ROW);
    const tag = `left-${randomBytes(4).toString("hex")}`;
    for (let session = 0; session < 10; session++) {
      const client = await WireClient.connect(proxy.port);
      await client.login({ user: agent.wallet, database: providerId }, await agent.token());
      client.send(
        Buffer.concat([
          frontend.parse("", "INSERT INTO items (name) VALUES ($1), ($1)"),
          frontend.bind("", "", [`${tag}-${session}`]),
          frontend.execute(""),
          encodeFrame(FrontendCode.Sync),
        ]),
      );
      // Gone as soon as the write's count is in: the Sync that commits it may be on its way.
      await client.until("C");
      client.destroy();
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
    const kept = await rowsNamed(tag);
    expect((await ledgerOf(agent)).charged).toBe(BigInt(kept) * ROW);
  });
});
