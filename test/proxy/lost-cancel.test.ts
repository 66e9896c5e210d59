import { connect, createServer, type Server, type Socket } from "node:net";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { TestDatabase } from "../support/database.js";
import {
  createProviderDatabase,
  registerPricedProvider,
  startTestGateway,
  type TestGateway,
} from "../support/gateway.js";
import { connectAgent, fundedTestAgent, startTestProxy, type TestProxy } from "../support/proxy.js";

/** The code of a CancelRequest packet (length 16). */
const CANCEL_REQUEST_CODE = 80877102;

let gateway: TestGateway;
let proxy: TestProxy;
let providerDb: TestDatabase;
let providerId: string;
let forwarder: Server;
/** Cancel requests the forwarder drops before it passes one on. */
let cancelsToDrop = 0;
let cancelsDropped = 0;

/** A TCP forwarder to the provider's PostgreSQL that loses the cancel requests it is told to. */
async function startForwarder(target: URL): Promise<number> {
  forwarder = createServer((client: Socket) => {
    client.on("error", () => {});
    client.once("data", (first: Buffer) => {
      const isCancel = first.length === 16 && first.readInt32BE(4) === CANCEL_REQUEST_CODE;
      if (isCancel && cancelsToDrop > 0) {
        cancelsToDrop--;
        cancelsDropped++;
        client.destroy();
        return;
      }
      const server = connect(Number(target.port || 5432), target.hostname);
      server.on("error", () => client.destroy());
      client.on("close", () => server.destroy());
      server.on("close", () => client.destroy());
      server.write(first);
      client.pipe(server);
      server.pipe(client);
    });
  });
  await new Promise<void>((resolve) => forwarder.listen(0, "127.0.0.1", resolve));
  return (forwarder.address() as { port: number }).port;
}

/** Backends of the provider running a query that matches `pattern`. */
async function sleepingBackends(pattern: string): Promise<number> {
  const admin = new pg.Client({ connectionString: providerDb.url });
  await admin.connect();
  try {
    const { rows } = await admin.query(
      "SELECT count(*)::int AS n FROM pg_stat_activity WHERE state = 'active' AND query LIKE $1",
      [pattern],
    );
    return rows[0].n;
  } finally {
    await admin.end();
  }
}

/** Polls the running backends whose query matches `pattern` until `done(count)` or `ms` pass; the last count. */
async function backendsUntil(pattern: string, done: (count: number) => boolean, ms: number): Promise<number> {
  const deadline = Date.now() + ms;
  let count = await sleepingBackends(pattern);
  while (!done(count) && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 20));
    count = await sleepingBackends(pattern);
  }
  return count;
}

/** Starts `sql` as a new agent session, waits for it to run upstream, then drops the client with the next cancel lost. */
async function vanishMidStatement(sql: string, pattern: string): Promise<void> {
  const agent = await fundedTestAgent(gateway, providerId, 1_000_000n);
  const client = await connectAgent(proxy, agent, providerId);
  client.on("error", () => {});
  void client.query(sql).catch(() => {});
  expect(await backendsUntil(pattern, (n) => n > 0, 5000)).toBe(1);
  cancelsToDrop = 1;
  cancelsDropped = 0;
  (client as unknown as { connection: { stream: Socket } }).connection.stream.destroy();
}

beforeAll(async () => {
  gateway = await startTestGateway();
  proxy = await startTestProxy(gateway);
  providerDb = await createProviderDatabase(10);
  const url = new URL(providerDb.url);
  url.port = String(await startForwarder(new URL(providerDb.url)));
  url.hostname = "127.0.0.1";
  ({ providerId } = await registerPricedProvider(gateway, url.toString()));
});
afterAll(async () => {
  await proxy?.close();
  await gateway?.close();
  await providerDb?.drop();
  await new Promise((resolve) => forwarder?.close(resolve));
});

describe("a client that vanishes mid-statement", () => {
  it("has its statement stopped even when the first cancel is lost on the way", async () => {
    await vanishMidStatement("SELECT pg_sleep(9)", "SELECT pg_sleep(9)%");
    // Well before the statement's own end (9 s) or the statement timeout (10 s).
    expect(await backendsUntil("SELECT pg_sleep(9)%", (n) => n === 0, 3000)).toBe(0);
    expect(cancelsDropped).toBe(1);
  });

  it("has a write it left running stopped the same way, and the write rolled back", async () => {
    const pattern = "UPDATE items SET name = 'slept'%";
    await vanishMidStatement(
      "UPDATE items SET name = 'slept' WHERE id = 1 AND pg_sleep(9) IS NOT NULL",
      pattern,
    );
    expect(await backendsUntil(pattern, (n) => n === 0, 3000)).toBe(0);
    expect(cancelsDropped).toBe(1);
    const admin = new pg.Client({ connectionString: providerDb.url });
    await admin.connect();
    const { rows } = await admin.query("SELECT name FROM items WHERE id = 1");
    await admin.end();
    expect(rows[0].name).not.toBe("slept");
  });
});
