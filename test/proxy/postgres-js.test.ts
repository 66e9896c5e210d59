import { type AddressInfo, createServer, type Socket, connect as tcpConnect } from "node:net";
import pg from "pg";
import postgres from "postgres";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { costOfRows } from "../../src/billing/cost.js";
import { getBalance } from "../../src/billing/ledger.js";
import type { TestDatabase } from "../support/database.js";
import {
  createProviderDatabase,
  registerPricedProvider,
  startTestGateway,
  type TestGateway,
} from "../support/gateway.js";
import { fundedTestAgent, startTestProxy, type TestAgent, type TestProxy } from "../support/proxy.js";
import {
  expectChargedPerStatement,
  ODD_PRICE,
  ODD_PRICING,
  waitForCharges,
} from "../support/real-clients.js";

let gateway: TestGateway;
let proxy: TestProxy;
let providerDb: TestDatabase;
let providerId: string;
const FUNDS = 1_000_000n;
const ITEMS = 60;
/**
 * postgres.js opens each connection by reading the server's array types (fetch_types, on by default): a real
 * query, charged like any other. Its row count comes from running the same query directly.
 */
let arrayTypeRows: number;
const withArrayTypes = (statements: { rows: number; sql?: string | RegExp }[]) => [
  { rows: arrayTypeRows, sql: /select b\.oid, b\.typarray\s+from pg_catalog\.pg_type a/ },
  ...statements,
];

beforeAll(async () => {
  gateway = await startTestGateway();
  proxy = await startTestProxy(gateway);
  providerDb = await createProviderDatabase(ITEMS);
  ({ providerId } = await registerPricedProvider(gateway, providerDb.url, ODD_PRICING));
  arrayTypeRows = (
    await providerQuery(`select b.oid, b.typarray from pg_catalog.pg_type a left join pg_catalog.pg_type b on b.oid = a.typelem
      where a.typcategory = 'A' group by b.oid, b.typarray order by b.oid`)
  ).length;
  expect(arrayTypeRows).toBeGreaterThan(10);
});
afterAll(async () => {
  await proxy?.close();
  await gateway?.close();
  await providerDb?.drop();
});

/** One postgres.js connection (max: 1), so that every query of a test shares, and pipelines on, one session. */
async function connect(agent: TestAgent, options: postgres.Options<Record<string, never>> = {}) {
  return postgres({
    host: "127.0.0.1",
    port: proxy.port,
    user: agent.wallet,
    database: providerId,
    pass: await agent.token(),
    ssl: false,
    max: 1,
    onnotice: () => {},
    ...options,
  });
}

async function providerQuery<T extends pg.QueryResultRow>(sql: string): Promise<T[]> {
  const client = new pg.Client({ connectionString: providerDb.url });
  await client.connect();
  try {
    return (await client.query<T>(sql)).rows;
  } finally {
    await client.end();
  }
}

/**
 * A loopback relay between postgres.js and the proxy that watches the frames go by and records how many
 * Sync-terminated batches the client had sent ahead of the proxy's ReadyForQuery answers: the proof that the
 * proxy was really fed a pipeline.
 */
async function startPipelineTap(targetPort: number) {
  let inFlight = 0;
  let max = 0;
  const sockets: Socket[] = [];
  /** Calls `onFrame` with each typed frame's code; the client's first packet (StartupMessage) is untyped. */
  const frames = (untypedFirst: boolean, onFrame: (code: number) => void) => {
    let buffered = Buffer.alloc(0);
    let untyped = untypedFirst;
    return (chunk: Buffer) => {
      buffered = Buffer.concat([buffered, chunk]);
      for (;;) {
        const header = untyped ? 0 : 1;
        if (buffered.length < header + 4) return;
        const total = header + buffered.readInt32BE(header);
        if (buffered.length < total) return;
        if (!untyped) onFrame(buffered[0]!);
        untyped = false;
        buffered = buffered.subarray(total);
      }
    };
  };
  const server = createServer((client) => {
    const upstream = tcpConnect(targetPort, "127.0.0.1");
    sockets.push(client, upstream);
    let ready = false; // the first ReadyForQuery ends startup
    const fromClient = frames(true, (code) => {
      if (code === 0x53 /* Sync */ || code === 0x51 /* Query */) max = Math.max(max, ++inFlight);
    });
    const fromProxy = frames(false, (code) => {
      if (code !== 0x5a /* ReadyForQuery */) return;
      if (ready) inFlight--;
      ready = true;
    });
    client.on("data", (chunk: Buffer) => {
      fromClient(chunk);
      upstream.write(chunk);
    });
    upstream.on("data", (chunk: Buffer) => {
      fromProxy(chunk);
      client.write(chunk);
    });
    client.on("close", () => upstream.destroy());
    upstream.on("close", () => client.destroy());
    client.on("error", () => {});
    upstream.on("error", () => {});
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    port: (server.address() as AddressInfo).port,
    maxInFlight: () => max,
    close() {
      for (const socket of sockets) socket.destroy();
      server.close();
    },
  };
}

describe("postgres.js through the proxy", () => {
  for (const prepare of [true, false]) {
    it(`pipelines 50 concurrent queries on one connection (prepare: ${prepare}) and charges each one`, async () => {
      const agent = await fundedTestAgent(gateway, providerId, FUNDS);
      const tap = await startPipelineTap(proxy.port);
      const sql = await connect(agent, { prepare, port: tap.port });
      // Odd ids first: with prepare: false, a query with parameters waits for its Describe before the next
      // goes out, so the parameterless ones lead to make a pipeline in both modes.
      const ids = Array.from({ length: 50 }, (_, i) => (i < 25 ? 2 * i + 1 : 2 * (i - 24)));
      // Two shapes, so neighbours' results cannot be confused: one row by a bound id, and `id % 3 + 1` rows from
      // a text without parameters (postgres.js sends Parse/Bind/Execute/Sync for those without waiting).
      const limitOf = (id: number) => (id % 3) + 1;
      const rangeSql = (id: number) =>
        `SELECT id FROM items WHERE id >= ${id} ORDER BY id LIMIT ${limitOf(id)}`;
      const results = await Promise.all(
        ids.map((id) =>
          id % 2 === 0 ? sql`SELECT id, name FROM items WHERE id = ${id}` : sql.unsafe(rangeSql(id)),
        ),
      );
      results.forEach((rows, i) => {
        const id = ids[i]!;
        if (id % 2 === 0) expect([...rows]).toEqual([{ id, name: `item ${id}` }]);
        else expect(rows.map((r) => r.id)).toEqual(Array.from({ length: limitOf(id) }, (_, k) => id + k));
      });
      await sql.end();
      tap.close();
      expect(tap.maxInFlight()).toBeGreaterThan(5);
      await waitForCharges(proxy);
      await expectChargedPerStatement(
        gateway,
        agent,
        providerId,
        FUNDS,
        withArrayTypes(
          ids.map((id) =>
            id % 2 === 0
              ? { rows: 1, sql: "SELECT id, name FROM items WHERE id = $1" }
              : { rows: limitOf(id), sql: rangeSql(id) },
          ),
        ),
      );
    });
  }

  it("refuses a denied statement inside a pipeline without breaking its neighbours", async () => {
    const agent = await fundedTestAgent(gateway, providerId, FUNDS);
    const tap = await startPipelineTap(proxy.port);
    const sql = await connect(agent, { port: tap.port });
    // No parameters, so postgres.js need not wait for a Describe: it sends these in pipelines (of three, in
    // practice), each denied statement in one with an allowed neighbour.
    const settled = await Promise.allSettled([
      sql`SELECT name FROM items WHERE id = 1`,
      sql`DROP TABLE items`,
      sql`SELECT name FROM items WHERE id = 2`,
      sql`DELETE FROM items RETURNING *`,
      sql`SELECT count(*)::int AS n FROM items`,
      sql`SELEC 1`,
      sql`SELECT name FROM items WHERE id = 3`,
    ]);
    expect(settled.map((s) => s.status)).toEqual([
      "fulfilled",
      "rejected",
      "fulfilled",
      "rejected",
      "fulfilled",
      "rejected",
      "fulfilled",
    ]);
    const value = (i: number) => [
      ...(settled[i] as PromiseFulfilledResult<postgres.RowList<postgres.Row[]>>).value,
    ];
    const reason = (i: number) => (settled[i] as PromiseRejectedResult).reason;
    expect(value(0)).toEqual([{ name: "item 1" }]);
    expect(value(2)).toEqual([{ name: "item 2" }]);
    expect(value(4)).toEqual([{ n: ITEMS }]);
    expect(value(6)).toEqual([{ name: "item 3" }]);
    expect(reason(1)).toMatchObject({ code: "42501", message: expect.stringMatching(/no-drop/) });
    expect(reason(3)).toMatchObject({ code: "42501" });
    expect(reason(5)).toMatchObject({ code: "42601" });
    // The connection is still good for more.
    expect([...(await sql`SELECT 'still here' AS note`)]).toEqual([{ note: "still here" }]);
    await sql.end();
    tap.close();
    expect(tap.maxInFlight()).toBeGreaterThanOrEqual(3);
    expect(await providerQuery("SELECT count(*)::int AS n FROM items")).toEqual([{ n: ITEMS }]);
    await waitForCharges(proxy);
    await expectChargedPerStatement(
      gateway,
      agent,
      providerId,
      FUNDS,
      withArrayTypes([
        { rows: 1 },
        { rows: 1 },
        { rows: 1, sql: "SELECT count(*)::int AS n FROM items" },
        { rows: 1 },
        { rows: 1, sql: "SELECT 'still here' AS note" },
      ]),
    );
  });

  it("runs sql.begin transactions: commit, rollback on a thrown error, and rollback on a denied statement", async () => {
    const agent = await fundedTestAgent(gateway, providerId, FUNDS);
    const sql = await connect(agent);
    const committed = await sql.begin(async (tx) => {
      const updated = await tx`UPDATE items SET name = 'committed' WHERE id IN (1, 2)`;
      const rows = await tx`SELECT id, name FROM items WHERE id <= 3 ORDER BY id`;
      return { count: updated.count, rows: [...rows] };
    });
    expect(committed).toEqual({
      count: 2,
      rows: [
        { id: 1, name: "committed" },
        { id: 2, name: "committed" },
        { id: 3, name: "item 3" },
      ],
    });

    const thrown = await sql
      .begin(async (tx) => {
        await tx`UPDATE items SET name = 'rolled back' WHERE id BETWEEN 4 AND 6`;
        throw new Error("changed my mind");
      })
      .catch((e: unknown) => e);
    expect(thrown).toMatchObject({ message: "changed my mind" });

    const denied = await sql
      .begin(async (tx) => {
        await tx`UPDATE items SET name = 'rolled back' WHERE id = 7`;
        await tx`TRUNCATE items`;
      })
      .catch((e: unknown) => e);
    expect(denied).toMatchObject({ code: "42501" });
    expect(
      [...(await sql`SELECT id, name FROM items WHERE id BETWEEN 1 AND 7 ORDER BY id`)].map((r) => r.name),
    ).toEqual(["committed", "committed", "item 3", "item 4", "item 5", "item 6", "item 7"]);
    await sql.end();
    await waitForCharges(proxy);
    // Writes are charged by affected rows when they ran, whether or not their transaction committed.
    await expectChargedPerStatement(
      gateway,
      agent,
      providerId,
      FUNDS,
      withArrayTypes([
        { rows: 2, sql: "UPDATE items SET name = 'committed' WHERE id IN (1, 2)" },
        { rows: 3 },
        { rows: 3, sql: "UPDATE items SET name = 'rolled back' WHERE id BETWEEN 4 AND 6" },
        { rows: 1, sql: "UPDATE items SET name = 'rolled back' WHERE id = 7" },
        { rows: 7 },
      ]),
    );
    await providerQuery("UPDATE items SET name = 'item ' || id WHERE id IN (1, 2)");
  });

  it("reads through a cursor in batches of 10, charging each batch fetched", async () => {
    const agent = await fundedTestAgent(gateway, providerId, FUNDS);
    const sql = await connect(agent);
    const batches: number[][] = [];
    for await (const rows of sql`SELECT id FROM items WHERE id <= ${35} ORDER BY id`.cursor(10)) {
      batches.push(rows.map((r) => r.id));
    }
    expect(batches.map((b) => b.length)).toEqual([10, 10, 10, 5]);
    expect(batches.flat()).toEqual(Array.from({ length: 35 }, (_, i) => i + 1));

    // A cursor abandoned after its first batch: only that batch is charged.
    for await (const rows of sql`SELECT id FROM items ORDER BY id DESC`.cursor(10)) {
      expect(rows[0]).toEqual({ id: ITEMS });
      break;
    }
    expect([...(await sql`SELECT 1 AS one`)]).toEqual([{ one: 1 }]);
    await sql.end();
    await waitForCharges(proxy);
    await expectChargedPerStatement(
      gateway,
      agent,
      providerId,
      FUNDS,
      withArrayTypes([
        { rows: 10 },
        { rows: 10 },
        { rows: 10 },
        { rows: 5 },
        { rows: 10, sql: "SELECT id FROM items ORDER BY id DESC" },
        { rows: 1 },
      ]),
    );
  });
  it("runs a multi-statement simple query and charges each statement", async () => {
    const agent = await fundedTestAgent(gateway, providerId, FUNDS);
    const sql = await connect(agent);
    const results = await sql
      .unsafe("SELECT id FROM items WHERE id <= 2 ORDER BY id; SELECT 'two' AS n; SELECT 1 WHERE false")
      .simple();
    expect((results as unknown as postgres.Row[][]).map((r) => [...r])).toEqual([
      [{ id: 1 }, { id: 2 }],
      [{ n: "two" }],
      [],
    ]);
    await sql.end();
    await waitForCharges(proxy);
    await expectChargedPerStatement(
      gateway,
      agent,
      providerId,
      FUNDS,
      withArrayTypes([
        { rows: 2, sql: "SELECT id FROM items WHERE id <= 2 ORDER BY id" },
        { rows: 1, sql: "SELECT 'two' AS n" },
        { rows: 0 },
      ]),
    );
  });

  it("cuts a pipelined result off when the balance runs out, charges exactly the rows delivered, and refuses what follows", async () => {
    // Enough for the connection's array-type query and 25 rows more.
    const funds = costOfRows(arrayTypeRows, ODD_PRICE) + costOfRows(25, ODD_PRICE);
    const agent = await fundedTestAgent(gateway, providerId, funds);
    const sql = await connect(agent);
    await sql`SELECT 1 WHERE false`; // connected, types read
    const settled = await Promise.allSettled([
      sql`SELECT id FROM items ORDER BY id`,
      sql`SELECT 2 AS two`,
      sql`SELECT name FROM items WHERE id = 1`,
    ]);
    expect(settled.map((s) => s.status)).toEqual(["rejected", "rejected", "rejected"]);
    const reasons = settled.map((s) => (s as PromiseRejectedResult).reason);
    expect(reasons[0]).toMatchObject({
      code: "PT402",
      message: expect.stringMatching(/cut off after 25 rows/),
    });
    expect(reasons[1]).toMatchObject({ code: "PT402" });
    expect(reasons[2]).toMatchObject({ code: "PT402" });
    await sql.end();
    await waitForCharges(proxy);
    await expectChargedPerStatement(
      gateway,
      agent,
      providerId,
      funds,
      withArrayTypes([{ rows: 25, sql: "SELECT id FROM items ORDER BY id" }]),
    );
    expect(await getBalance(gateway.ctx.db, agent.wallet, providerId)).toMatchObject({
      balanceMicro: 0n,
      reservedMicro: 0n,
    });
  });
});
