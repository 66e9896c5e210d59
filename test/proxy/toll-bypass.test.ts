import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { costOfRows, priceOf } from "../../src/billing/cost.js";
import { getBalance } from "../../src/billing/ledger.js";
import { DATABASE_TEXT_LIMIT } from "../../src/billing/message-bounds.js";
import { FrontendCode } from "../../src/proxy/message-codes.js";
import { encodeFrame, encodeStartupMessage } from "../../src/proxy/serializer.js";
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
import { waitFor, waitForCharges } from "../support/real-clients.js";
import { commandTags, errorOf, firstError, WireClient } from "../support/wire-client.js";

/**
 * The ways a hostile agent tried to get data or writes through the wire proxy without paying for them, each
 * reproduced as it was found. A row costs 1000 micro-USDC; the provider allows 100 rows written per statement.
 */
let gateway: TestGateway;
let proxy: TestProxy;
let providerDb: TestDatabase;
let providerId: string;
let apiKey: string;
let provider: pg.Pool;
const ROW = 1000n;
const price = priceOf({ priceMicroPer1000Rows: 1_000_000n, markupPpm: 1_000_000n });

beforeAll(async () => {
  gateway = await startTestGateway();
  proxy = await startTestProxy(gateway);
  providerDb = await createProviderDatabase(300);
  ({ providerId, apiKey } = await registerPricedProvider(gateway, providerDb.url));
  const limits = await gateway.app.inject({
    method: "POST",
    url: `/api/providers/${providerId}/pricing`,
    headers: { "x-api-key": apiKey },
    payload: { basePricePer1000Rows: 1, markupMultiplier: 1, maxRowsWrittenPerStatement: 100 },
  });
  expect(limits.json()).toMatchObject({ maxRowsWrittenPerStatement: 100, lockTimeoutMs: 5000 });
  provider = new pg.Pool({ connectionString: providerDb.url, max: 3 });
});
afterAll(async () => {
  await provider?.end();
  await proxy?.close();
  await gateway?.close();
  await providerDb?.drop();
});

async function balanceOf(agent: TestAgent): Promise<bigint> {
  await waitForCharges(proxy);
  return (await getBalance(gateway.ctx.db, agent.wallet, providerId)).balanceMicro;
}

async function countNamed(name: string): Promise<number> {
  const { rows } = await provider.query("SELECT count(*)::int AS n FROM items WHERE name = $1", [name]);
  return rows[0].n;
}

/** A raw session of `agent`, logged in. */
async function rawSession(agent: TestAgent, extra: Record<string, string> = {}): Promise<WireClient> {
  const client = await WireClient.connect(proxy.port);
  await client.login({ user: agent.wallet, database: providerId, ...extra }, await agent.token());
  return client;
}

describe("one encoding: the guard judges the bytes the server runs", () => {
  it("refuses a client encoding other than UTF8 given in options at connect time", async () => {
    const agent = await fundedTestAgent(gateway, providerId, 100n * ROW);
    const client = await WireClient.connect(proxy.port);
    client.send(
      encodeStartupMessage({ user: agent.wallet, database: providerId, options: "-c client_encoding=SJIS" }),
    );
    const messages = await client.untilClosed();
    expect(firstError(messages)).toMatchObject({ code: "22023", severity: "FATAL" });
    expect(firstError(messages)?.message).toMatch(/client_encoding "SJIS" is not allowed/);
  });

  it("runs the SJIS smuggling bytes as the one harmless SELECT the guard saw", async () => {
    const agent = await fundedTestAgent(gateway, providerId, 100n * ROW);
    const client = await rawSession(agent);
    const before = (await provider.query("SELECT count(*)::int AS n FROM orders")).rows[0].n;
    // In SJIS, C3 81 5C... would hide the backslash; in UTF-8 it is "Á" and the literal goes on to the last quote.
    const sql = Buffer.concat([
      Buffer.from("SELECT E'", "latin1"),
      Buffer.from([0xc3, 0x81]),
      Buffer.from("\\'; DELETE FROM orders; --'", "latin1"),
    ]);
    client.send(encodeFrame(FrontendCode.Query, Buffer.concat([sql, Buffer.from([0])])));
    const answer = await client.until("Z");
    expect(commandTags(answer)).toEqual(["SELECT 1"]);
    expect((await provider.query("SELECT count(*)::int AS n FROM orders")).rows[0].n).toBe(before);
    client.destroy();
  });

  it("refuses SET client_encoding, SET NAMES and set_config to anything but UTF8", async () => {
    const agent = await fundedTestAgent(gateway, providerId, 100n * ROW);
    const client = await connectAgent(proxy, agent, providerId);
    for (const sql of [
      "SET client_encoding = 'SJIS'",
      "SET NAMES 'BIG5'",
      "SELECT set_config('client_encoding', 'SJIS', false)",
      "RESET client_encoding",
    ])
      await expect(client.query(sql), sql).rejects.toMatchObject({ code: "42501" });
    expect((await client.query("SHOW client_encoding")).rows).toEqual([{ client_encoding: "UTF8" }]);
    await client.end();
  });
});

describe("nothing from the database leaves unpaid", () => {
  it("bounds the text of a database error to 256 bytes and charges it as one row", async () => {
    const agent = await fundedTestAgent(gateway, providerId, 100n * ROW);
    const client = await connectAgent(proxy, agent, providerId);
    const error = (await client
      .query("SELECT (json_agg(i)::text)::int FROM items i")
      .catch((e: unknown) => e)) as pg.DatabaseError;
    expect(error.code).toBe("22P02");
    expect(Buffer.byteLength(error.message)).toBeLessThanOrEqual(DATABASE_TEXT_LIMIT);
    expect(error.message).toMatch(/^invalid input syntax for type integer: .*…$/s);
    expect(error.where).toBeUndefined();
    await client.end();
    expect(await balanceOf(agent)).toBe(100n * ROW - ROW);
  });

  it("refuses every statement of an agent with no funds before it reaches the database", async () => {
    // With no funds no session opens at all (PT402 at startup); one row's worth opens it and is spent at once.
    const agent = await fundedTestAgent(gateway, providerId, ROW);
    const client = await connectAgent(proxy, agent, providerId);
    expect((await client.query("SELECT id FROM items WHERE id = 1")).rowCount).toBe(1);
    for (const sql of [
      "DECLARE z CURSOR WITH HOLD FOR SELECT (json_agg(i)::text)::int FROM items i",
      "DECLARE m CURSOR WITH HOLD FOR SELECT * FROM items WHERE id > 250",
      "BEGIN",
      "MOVE ALL IN m",
    ])
      await expect(client.query(sql), sql).rejects.toMatchObject({ code: "PT402" });
    // The extended protocol too: its Parse never reaches the database.
    await expect(client.query("SELECT $1::int AS n", [1])).rejects.toMatchObject({ code: "PT402" });
    await client.end();
  });

  it("charges MOVE as one row: it answers a count", async () => {
    const agent = await fundedTestAgent(gateway, providerId, 100n * ROW);
    const client = await connectAgent(proxy, agent, providerId);
    await client.query("BEGIN");
    await client.query("DECLARE m CURSOR FOR SELECT * FROM items WHERE id > 250");
    const moved = await client.query("MOVE ALL IN m");
    expect(moved).toMatchObject({ command: "MOVE", rowCount: 50 });
    await client.query("COMMIT");
    await client.end();
    expect(await balanceOf(agent)).toBe(100n * ROW - ROW);
  });

  it("charges a notice of the database as one row and bounds its text", async () => {
    const agent = await fundedTestAgent(gateway, providerId, 100n * ROW);
    const client = await connectAgent(proxy, agent, providerId);
    const notices: { severity?: string; code?: string }[] = [];
    client.on("notice", (notice) => notices.push(notice));
    // COMMIT outside a transaction: PostgreSQL's WARNING "there is no transaction in progress".
    await client.query("COMMIT");
    await client.end();
    expect(notices.map((n) => [n.severity, n.code])).toEqual([["WARNING", "25P01"]]);
    expect(await balanceOf(agent)).toBe(100n * ROW - ROW);
  });
});

describe("writes are paid for before they commit, or undone", () => {
  it("refuses data-modifying CTEs and EXPLAIN ANALYZE of a write", async () => {
    const agent = await fundedTestAgent(gateway, providerId, 100n * ROW);
    const client = await connectAgent(proxy, agent, providerId);
    const before = (await provider.query("SELECT count(*)::int AS n FROM orders")).rows[0].n;
    for (const [sql, rule] of [
      [
        "WITH i AS (INSERT INTO orders (item_id) SELECT id FROM items RETURNING 1) SELECT 1 WHERE false",
        "no-data-modifying-cte",
      ],
      [
        "WITH d AS (DELETE FROM orders WHERE id > 0 RETURNING 1) SELECT count(*) FROM d",
        "no-data-modifying-cte",
      ],
      [
        "EXPLAIN ANALYZE INSERT INTO orders (item_id) SELECT id FROM items WHERE id <= 100",
        "no-explain-analyze-write",
      ],
    ] as const)
      await expect(client.query(sql), sql).rejects.toMatchObject({
        code: "42501",
        message: expect.stringContaining(`(${rule})`),
      });
    await client.end();
    expect((await provider.query("SELECT count(*)::int AS n FROM orders")).rows[0].n).toBe(before);
  });

  it("commits a write in autocommit once it is paid for, and charges its rows", async () => {
    const agent = await fundedTestAgent(gateway, providerId, 100n * ROW);
    const client = await connectAgent(proxy, agent, providerId);
    const updated = await client.query("UPDATE items SET name = 'paid' WHERE id BETWEEN 1 AND 5");
    expect(updated).toMatchObject({ command: "UPDATE", rowCount: 5 });
    // Committed at once: another session sees it while this one stays open.
    expect(await countNamed("paid")).toBe(5);
    expect((await client.query("SELECT 1 AS one")).rows).toEqual([{ one: 1 }]);
    await client.end();
    expect(await balanceOf(agent)).toBe(100n * ROW - 5n * ROW - ROW);
    await provider.query("UPDATE items SET name = 'item ' || id WHERE id BETWEEN 1 AND 5");
  });

  it("rolls back a write the balance does not pay for and charges nothing for it", async () => {
    const agent = await fundedTestAgent(gateway, providerId, 2n * ROW);
    const client = await connectAgent(proxy, agent, providerId);
    await expect(client.query("UPDATE items SET name = 'unpaid' WHERE id <= 50")).rejects.toMatchObject({
      code: "PT402",
      message: expect.stringMatching(/wrote 50 rows, which the balance does not pay for; it was rolled back/),
    });
    expect(await countNamed("unpaid")).toBe(0);
    // The session goes on, outside any transaction.
    expect((await client.query("SELECT 1 AS one")).rows).toEqual([{ one: 1 }]);
    await client.end();
    expect(await balanceOf(agent)).toBe(ROW);
  });

  it("rolls back a write with the extended protocol the balance does not pay for", async () => {
    const agent = await fundedTestAgent(gateway, providerId, 2n * ROW);
    const client = await connectAgent(proxy, agent, providerId);
    await expect(
      client.query("UPDATE items SET name = $1 WHERE id <= $2", ["unpaid extended", 50]),
    ).rejects.toMatchObject({ code: "PT402" });
    expect(await countNamed("unpaid extended")).toBe(0);
    expect((await client.query("SELECT $1::int AS n", [7])).rows).toEqual([{ n: 7 }]);
    await client.end();
    expect(await balanceOf(agent)).toBe(ROW);
  });

  it("bounds every write by the rows it wrote, whatever its WHERE says, in and out of transactions", async () => {
    const agent = await fundedTestAgent(gateway, providerId, 10_000n * ROW);
    const client = await connectAgent(proxy, agent, providerId);
    for (const where of ["id > 0", "id = id", "id IS NOT NULL OR id IS NULL"]) {
      await expect(client.query(`UPDATE items SET name = 'everything' WHERE ${where}`)).rejects.toMatchObject(
        {
          code: "54000",
          message: expect.stringMatching(
            /wrote 300 rows, more than the provider allows in one statement \(100\)/,
          ),
        },
      );
    }
    await client.query("BEGIN");
    await expect(client.query("DELETE FROM orders WHERE id > 0")).rejects.toMatchObject({ code: "54000" });
    // The block is aborted, as after any failed statement: its COMMIT rolls back.
    expect((await client.query("COMMIT")).command).toBe("ROLLBACK");
    await expect(
      client.query("UPDATE items SET name = $1 WHERE id > $2", ["everything", 0]),
    ).rejects.toMatchObject({ code: "54000" });
    await client.end();
    expect(await countNamed("everything")).toBe(0);
    expect((await provider.query("SELECT count(*)::int AS n FROM orders")).rows[0].n).toBe(150);
    expect(await balanceOf(agent)).toBe(10_000n * ROW);
  });

  it("aborts the agent's own transaction when a write in it is not paid for, even with COMMIT pipelined behind", async () => {
    const agent = await fundedTestAgent(gateway, providerId, 2n * ROW);
    const client = await rawSession(agent);
    expect(commandTags(await client.query("BEGIN"))).toEqual(["BEGIN"]);
    // Both queries in one write: the proxy holds the COMMIT until the UPDATE is paid for, which it is not.
    const query = (sql: string) => encodeFrame(FrontendCode.Query, Buffer.from(`${sql}\0`));
    client.send(query("UPDATE items SET name = 'pipelined' WHERE id <= 50"), query("COMMIT"));
    const first = await client.until("Z");
    expect(errorOf(first.find((m) => m.type === "E")!).code).toBe("PT402");
    expect(first.at(-1)!.payload.toString()).toBe("E");
    const second = await client.until("Z");
    expect(commandTags(second)).toEqual(["ROLLBACK"]);
    expect(second.at(-1)!.payload.toString()).toBe("I");
    client.destroy();
    expect(await countNamed("pipelined")).toBe(0);
  });

  it("refuses a write and the COMMIT of its transaction in one query", async () => {
    const agent = await fundedTestAgent(gateway, providerId, 100n * ROW);
    const client = await connectAgent(proxy, agent, providerId);
    for (const sql of [
      "BEGIN; UPDATE items SET name = 'one shot' WHERE id = 1; COMMIT",
      "UPDATE items SET name = 'one shot' WHERE id = 1; COMMIT",
    ])
      await expect(client.query(sql), sql).rejects.toMatchObject({ code: "0A000" });
    // A write and a rollback, or a write leaving its block open, are fine.
    await client.query("BEGIN; UPDATE items SET name = 'one shot' WHERE id = 1; ROLLBACK");
    await client.query("BEGIN; UPDATE items SET name = 'one shot' WHERE id = 1");
    expect(await countNamed("one shot")).toBe(0);
    await client.query("COMMIT");
    expect(await countNamed("one shot")).toBe(1);
    await client.end();
    await provider.query("UPDATE items SET name = 'item 1' WHERE id = 1");
  });
});

describe("no lock held by an idle agent", () => {
  it("ends an agent idle in a transaction after the provider's timeout, releasing its row locks", async () => {
    const { providerId: quick, apiKey: quickKey } = await registerPricedProvider(gateway, providerDb.url);
    const set = await gateway.app.inject({
      method: "POST",
      url: `/api/providers/${quick}/pricing`,
      headers: { "x-api-key": quickKey },
      payload: {
        basePricePer1000Rows: 1,
        markupMultiplier: 1,
        idleInTransactionTimeoutMs: 1000,
        lockTimeoutMs: 200,
      },
    });
    expect(set.json()).toMatchObject({ idleInTransactionTimeoutMs: 1000, lockTimeoutMs: 200 });
    const agent = await fundedTestAgent(gateway, quick, 100n * ROW);
    const client = await connectAgent(proxy, agent, quick);
    const heard: string[] = [];
    const ended = new Promise<Error>((resolve) =>
      client.on("error", (error) => {
        heard.push(error.message);
        resolve(error);
      }),
    );
    await client.query("BEGIN");
    await client.query("UPDATE items SET name = name WHERE id = 10");
    // The provider's own UPDATE of that row waits for the lock, and gets it once the agent is ended.
    const started = Date.now();
    await provider.query("UPDATE items SET name = name WHERE id = 10");
    expect(Date.now() - started).toBeLessThan(4000);
    expect((await ended).message).toMatch(/idle-in-transaction timeout/);
    // The database's FATAL is the one the client hears, as from PostgreSQL: no second one from the proxy.
    await waitFor(() => heard.length >= 2, 5_000, "the connection to end");
    expect(heard).toEqual([
      expect.stringMatching(/idle-in-transaction timeout/),
      "Connection terminated unexpectedly",
    ]);

    // lock_timeout: an agent waiting on the provider's lock gives up quickly.
    const holder = await provider.connect();
    await holder.query("BEGIN");
    await holder.query("UPDATE items SET name = name WHERE id = 11");
    const waiter = await connectAgent(proxy, agent, quick);
    await expect(waiter.query("UPDATE items SET name = name WHERE id = 11")).rejects.toMatchObject({
      code: "55P03",
    });
    await holder.query("ROLLBACK");
    holder.release();
    await waiter.end();
  });
});

describe("never an overcharge", () => {
  it("charges COPY by its data rows, not its CSV header or binary trailer", async () => {
    const agent = await fundedTestAgent(gateway, providerId, 100n * ROW);
    const client = await rawSession(agent);
    for (const sql of [
      "COPY (SELECT id FROM items WHERE id <= 3) TO STDOUT (FORMAT csv, HEADER)",
      "COPY (SELECT id FROM items WHERE id <= 3) TO STDOUT (FORMAT binary)",
      "COPY (SELECT id FROM items WHERE id < 0) TO STDOUT (FORMAT binary)",
      "COPY (SELECT id FROM items WHERE id <= 3) TO STDOUT",
    ]) {
      const messages = await client.query(sql);
      expect(commandTags(messages), sql).toEqual([sql.includes("< 0") ? "COPY 0" : "COPY 3"]);
    }
    client.destroy();
    expect(await balanceOf(agent)).toBe(100n * ROW - 9n * ROW);
    expect(costOfRows(9, price)).toBe(9n * ROW);
  });
});
