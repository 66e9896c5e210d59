import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { getBalance } from "../../src/billing/ledger.js";
import { KEPT_ROWS_MAX_BYTES } from "../../src/proxy/kept-rows.js";
import { encodeSync } from "../../src/proxy/serializer.js";
import type { TestDatabase } from "../support/database.js";
import {
  createProviderDatabase,
  registerPricedProvider,
  startTestGateway,
  type TestGateway,
} from "../support/gateway.js";
import { fundedTestAgent, startTestProxy, type TestAgent, type TestProxy } from "../support/proxy.js";
import { waitForCharges } from "../support/real-clients.js";
import { type BackendMessage, errorOf, frontend, WireClient } from "../support/wire-client.js";

/**
 * A write executed with an Execute row limit (pgjdbc's executeUpdate sends 1) runs as PostgreSQL runs it: whole at
 * its first Execute, its RETURNING rows past the limit kept for the portal's next Executes; it is paid by its
 * rows before it can commit. A row costs 1000 micro-USDC; the provider allows 100 rows written per statement.
 */
let gateway: TestGateway;
let proxy: TestProxy;
let providerDb: TestDatabase;
let providerId: string;
let provider: pg.Pool;
const ROW = 1000n;

beforeAll(async () => {
  gateway = await startTestGateway();
  proxy = await startTestProxy(gateway);
  providerDb = await createProviderDatabase(300);
  const registered = await registerPricedProvider(gateway, providerDb.url);
  providerId = registered.providerId;
  const limits = await gateway.app.inject({
    method: "POST",
    url: `/api/providers/${providerId}/pricing`,
    headers: { "x-api-key": registered.apiKey },
    payload: { basePricePer1000Rows: 1, markupMultiplier: 1, maxRowsWrittenPerStatement: 100 },
  });
  expect(limits.statusCode).toBe(200);
  provider = new pg.Pool({ connectionString: providerDb.url, max: 2 });
});
afterAll(async () => {
  await provider?.end();
  await proxy?.close();
  await gateway?.close();
  await providerDb?.drop();
});

async function session(agent: TestAgent): Promise<WireClient> {
  const client = await WireClient.connect(proxy.port);
  await client.login({ user: agent.wallet, database: providerId }, await agent.token());
  return client;
}

/** The messages up to ReadyForQuery as tokens: a type letter, a row's first column, a tag or an SQLSTATE. */
async function answers(client: WireClient, ...frames: Buffer[]): Promise<string[]> {
  client.send(...frames);
  return (await client.until("Z", 20_000)).map(token);
}

function token(message: BackendMessage): string {
  if (message.type === "C") return `C:${message.payload.toString("utf8", 0, message.payload.length - 1)}`;
  if (message.type === "E") return `E:${errorOf(message).code}`;
  if (message.type === "D") return `D:${message.payload.toString("utf8", 6)}`;
  return message.type;
}

async function namesOf(ids: string): Promise<string[]> {
  const { rows } = await provider.query(`SELECT name FROM items WHERE ${ids} ORDER BY id`);
  return rows.map((r: { name: string }) => r.name);
}

async function balanceOf(agent: TestAgent): Promise<bigint> {
  await waitForCharges(proxy);
  return (await getBalance(gateway.ctx.db, agent.wallet, providerId)).balanceMicro;
}

describe("a write executed with a row limit", () => {
  it("answers as PostgreSQL does: the limit's rows, PortalSuspended, the rest at the next Executes, and the write's count charged", async () => {
    const agent = await fundedTestAgent(gateway, providerId, 100n * ROW);
    const client = await session(agent);
    expect(
      await answers(
        client,
        frontend.parse("", "BEGIN"),
        frontend.bind("", ""),
        frontend.execute(""),
        encodeSync(),
      ),
    ).toEqual(["1", "2", "C:BEGIN", "Z"]);
    // PostgreSQL 15's own answers to these messages, byte for byte (tags and rows).
    expect(
      await answers(
        client,
        frontend.parse(
          "",
          "UPDATE items SET name = 'limited ' || id WHERE id BETWEEN 11 AND 15 RETURNING id",
        ),
        frontend.bind("p", ""),
        frontend.execute("p", 2),
        frontend.execute("p", 2),
        frontend.execute("p", 2),
        frontend.execute("p", 2),
        encodeSync(),
      ),
    ).toEqual(["1", "2", "D:11", "D:12", "s", "D:13", "D:14", "s", "D:15", "C:UPDATE 1", "C:UPDATE 0", "Z"]);
    // Uncommitted until the agent commits.
    expect(await namesOf("id = 11")).toEqual(["item 11"]);
    expect(
      await answers(
        client,
        frontend.parse("", "COMMIT"),
        frontend.bind("", ""),
        frontend.execute(""),
        encodeSync(),
      ),
    ).toEqual(["1", "2", "C:COMMIT", "Z"]);
    expect(await namesOf("id BETWEEN 11 AND 15")).toEqual([11, 12, 13, 14, 15].map((id) => `limited ${id}`));

    // Autocommit: pgjdbc's executeUpdate (limit 1), with and without RETURNING; a limit the rows fill exactly.
    expect(
      await answers(
        client,
        frontend.parse("", "UPDATE items SET name = 'one' WHERE id BETWEEN 16 AND 18"),
        frontend.bind("", ""),
        frontend.execute("", 1),
        encodeSync(),
      ),
    ).toEqual(["1", "2", "C:UPDATE 3", "Z"]);
    expect(
      await answers(
        client,
        frontend.parse("", "UPDATE items SET name = 'two' WHERE id = 19 RETURNING id"),
        frontend.bind("q", ""),
        frontend.execute("q", 1),
        frontend.execute("q", 1),
        encodeSync(),
      ),
    ).toEqual(["1", "2", "D:19", "s", "C:UPDATE 0", "Z"]);
    expect(
      await answers(
        client,
        frontend.parse("", "UPDATE items SET name = 'three' WHERE id BETWEEN 20 AND 21 RETURNING id"),
        frontend.bind("r", ""),
        frontend.execute("r", 5),
        encodeSync(),
      ),
    ).toEqual(["1", "2", "D:20", "D:21", "C:UPDATE 2", "Z"]);
    // The portal ended with its transaction at Sync.
    expect(await answers(client, frontend.execute("q", 1), encodeSync())).toEqual(["E:34000", "Z"]);
    client.destroy();
    expect(await namesOf("id BETWEEN 16 AND 21")).toEqual(["one", "one", "one", "two", "three", "three"]);
    // 5 + 3 + 1 + 2 rows, and the last error as one row.
    expect(await balanceOf(agent)).toBe(100n * ROW - 12n * ROW);
  });

  it("rolls back a write with a row limit that the balance does not pay for, and charges nothing for it", async () => {
    const agent = await fundedTestAgent(gateway, providerId, 2n * ROW);
    const client = await session(agent);
    const answer = await answers(
      client,
      frontend.parse("", "UPDATE items SET name = 'unpaid' WHERE id BETWEEN 31 AND 80"),
      frontend.bind("", ""),
      frontend.execute("", 1),
      encodeSync(),
    );
    expect(answer).toEqual(["1", "2", "E:PT402", "Z"]);
    expect(await namesOf("name = 'unpaid'")).toEqual([]);
    client.destroy();
    expect(await balanceOf(agent)).toBe(2n * ROW);
  });

  it("rolls back a write with a row limit that wrote more rows than the provider allows", async () => {
    const agent = await fundedTestAgent(gateway, providerId, 1000n * ROW);
    const client = await session(agent);
    expect(
      await answers(
        client,
        frontend.parse("", "UPDATE items SET name = 'too many' WHERE id <= 150 RETURNING id"),
        frontend.bind("", ""),
        frontend.execute("", 1),
        encodeSync(),
      ),
    ).toEqual(["1", "2", "D:1", "E:54000", "Z"]);
    expect(await namesOf("name = 'too many'")).toEqual([]);
    client.destroy();
  });

  it("rolls back a write whose RETURNING rows past the limit are more than the proxy keeps", async () => {
    const agent = await fundedTestAgent(gateway, providerId, 1000n * ROW);
    const client = await session(agent);
    const rowBytes = 1024 * 1024;
    const rows = Math.ceil(KEPT_ROWS_MAX_BYTES / rowBytes) + 5;
    client.dropRows = true;
    client.send(
      frontend.parse(
        "",
        `UPDATE items SET name = 'kept too much' WHERE id <= ${rows} RETURNING repeat('x', ${rowBytes})`,
      ),
      frontend.bind("", ""),
      frontend.execute("", 1),
      encodeSync(),
    );
    const answer = (await client.until("Z", 20_000)).map(token);
    expect(answer).toEqual(["1", "2", "E:54000", "Z"]);
    expect(client.rowsReceived).toBe(1);
    expect(await namesOf("name = 'kept too much'")).toEqual([]);
    // The session goes on.
    client.dropRows = false;
    expect(
      await answers(
        client,
        frontend.parse("", "SELECT 7"),
        frontend.bind("", ""),
        frontend.execute(""),
        encodeSync(),
      ),
    ).toEqual(["1", "2", "D:7", "C:SELECT 1", "Z"]);
    client.destroy();
  });
});
