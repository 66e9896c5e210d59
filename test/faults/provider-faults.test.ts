import { chmod, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { costOfRows, priceOf } from "../../src/billing/cost.js";
import { getBalance } from "../../src/billing/ledger.js";
import { type EmbeddedCluster, startEmbeddedCluster } from "../../src/db/embedded.js";
import { registerPricedProvider, startTestGateway, type TestGateway } from "../support/gateway.js";
import { fundedTestAgent, startTestProxy, type TestAgent, type TestProxy } from "../support/proxy.js";
import { waitFor } from "../support/real-clients.js";

/** 1 USDC per 1000 rows: a row costs 1000 micro-USDC. */
const PRICE = priceOf({ priceMicroPer1000Rows: 1_000_000n, markupPpm: 1_000_000n });
const FUNDED = 100_000_000n;

let dir: string;
let provider: EmbeddedCluster;
let providerUrl: string;
let gateway: TestGateway;
let proxy: TestProxy;
let providerId: string;

/** The provider's PostgreSQL, its own cluster so that it can be stopped: a least-privilege role and 5 000 rows. */
async function startProvider(port?: number): Promise<EmbeddedCluster> {
  return startEmbeddedCluster(join(dir, "provider"), port ? { port } : {});
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "pgtoll-provider-faults-"));
  // Run as root, the embedded cluster runs as `postgres`, which must be able to pass through this directory.
  await chmod(dir, 0o711);
  provider = await startProvider();
  const admin = new pg.Client({ connectionString: provider.adminUrl });
  await admin.connect();
  await admin.query("CREATE ROLE data_owner LOGIN PASSWORD 'owner-secret'");
  await admin.query("CREATE DATABASE data OWNER data_owner");
  await admin.end();
  providerUrl = `postgres://data_owner:owner-secret@127.0.0.1:${provider.port}/data`;
  const owner = new pg.Client({ connectionString: providerUrl });
  await owner.connect();
  await owner.query(
    "CREATE TABLE items (id int PRIMARY KEY, name text NOT NULL); INSERT INTO items SELECT g, 'item ' || g FROM generate_series(1, 5000) g",
  );
  await owner.end();
  gateway = await startTestGateway();
  proxy = await startTestProxy(gateway);
  ({ providerId } = await registerPricedProvider(gateway, providerUrl));
}, 120_000);
afterAll(async () => {
  await proxy?.close();
  await gateway?.close();
  await provider?.stop();
  await rm(dir, { recursive: true, force: true });
});

async function connect(agent: TestAgent): Promise<pg.Client> {
  const client = new pg.Client({
    host: "127.0.0.1",
    port: proxy.port,
    user: agent.wallet,
    database: providerId,
    password: await agent.token(),
  });
  client.on("error", () => {});
  await client.connect();
  return client;
}

/** Runs `sql` and counts the rows that reached the client before it ended, or the error that ended it. */
function countRows(client: pg.Client, sql: string): Promise<{ rows: number; error?: { code?: string } }> {
  return new Promise((resolve) => {
    let rows = 0;
    const query = client.query(new pg.Query(sql));
    query.on("row", () => rows++);
    query.on("end", () => resolve({ rows }));
    query.on("error", (error: Error & { code?: string }) => resolve({ rows, error }));
  });
}

/** What the agent has been charged, once its sessions are closed and their windows written. */
async function charged(agent: TestAgent): Promise<bigint> {
  await waitFor(() => proxy.ctx.registry.size === 0, 10_000, "the sessions to end");
  await Promise.all(proxy.ctx.releases);
  await proxy.ctx.chargeWriter.flush();
  const balance = await getBalance(gateway.ctx.db, agent.wallet, providerId);
  expect(balance.reservedMicro).toBe(0n);
  return FUNDED - balance.balanceMicro;
}

/** pgtoll's sessions on the provider's database. */
async function upstreamSessions(): Promise<number> {
  const admin = new pg.Client({ connectionString: provider.adminUrl });
  await admin.connect();
  try {
    const { rows } = await admin.query(
      "SELECT count(*)::int AS n FROM pg_stat_activity WHERE usename = 'data_owner' AND pid <> pg_backend_pid()",
    );
    return rows[0].n;
  } finally {
    await admin.end();
  }
}

describe("the provider's database fails under an agent's session", () => {
  it("restarts mid-result: PostgreSQL's own error, only the rows delivered charged, the next session works", async () => {
    const agent = await fundedTestAgent(gateway, providerId, FUNDED);
    const client = await connect(agent);
    // Rows come slowly (a sleep per row), so the restart lands in the middle of the result.
    const running = countRows(client, "SELECT id, pg_sleep(0.002) FROM items");
    await new Promise((resolve) => setTimeout(resolve, 1500));
    await provider.stop();
    const result = await running;
    expect(["57P01", "08006"]).toContain(result.error?.code);
    expect(result.rows).toBeGreaterThan(0);
    expect(result.rows).toBeLessThan(5000);
    await client.end().catch(() => {});
    // Rows the proxy handed to the socket and the client read before the error: never more.
    const cost = await charged(agent);
    expect(cost).toBeGreaterThanOrEqual(costOfRows(result.rows, PRICE));
    expect(cost).toBeLessThanOrEqual(costOfRows(result.rows + 200, PRICE));

    // Down: a new session is refused with a connection error naming the provider's database.
    const refused = await connect(agent).then(
      () => null,
      (error: Error & { code?: string }) => error,
    );
    expect(refused?.code).toMatch(/^08/);
    expect(refused?.message).toMatch(/provider's database/);

    provider = await startProvider(provider.port);
    const again = await connect(agent);
    expect((await again.query("SELECT id FROM items WHERE id <= 3")).rowCount).toBe(3);
    await again.end();
    expect(await charged(agent)).toBe(cost + costOfRows(3, PRICE));
    expect(await upstreamSessions()).toBe(0);
  }, 60_000);

  it("out of connection slots: 53300 from PostgreSQL, and sessions work again once slots are free", async () => {
    const agent = await fundedTestAgent(gateway, providerId, FUNDED);
    const admin = new pg.Client({ connectionString: provider.adminUrl });
    await admin.connect();
    await admin.query("ALTER ROLE data_owner CONNECTION LIMIT 2");
    try {
      const holders = [await connect(agent), await connect(agent)];
      const third = await connect(agent).then(
        () => null,
        (error: Error & { code?: string }) => error,
      );
      expect(third?.code).toBe("53300");
      expect(third?.message).toMatch(/too many connections/);
      await Promise.all(holders.map((client) => client.end()));
      await waitFor(async () => (await upstreamSessions()) === 0, 5000, "the upstream sessions to close");
      const next = await connect(agent);
      expect((await next.query("SELECT id FROM items WHERE id <= 2")).rowCount).toBe(2);
      await next.end();
    } finally {
      await admin.query("ALTER ROLE data_owner CONNECTION LIMIT -1");
      await admin.end();
    }
    expect(await charged(agent)).toBe(costOfRows(2, PRICE));
  }, 60_000);

  it("slower than the statement timeout: 57014, its error charged as one row, the session goes on", async () => {
    const agent = await fundedTestAgent(gateway, providerId, FUNDED);
    const impatient = await startTestProxy(gateway, { statementTimeoutMs: 1500, metrics: proxy.ctx.metrics });
    try {
      const client = new pg.Client({
        host: "127.0.0.1",
        port: impatient.port,
        user: agent.wallet,
        database: providerId,
        password: await agent.token(),
      });
      await client.connect();
      await expect(client.query("SELECT pg_sleep(5)")).rejects.toMatchObject({ code: "57014" });
      expect((await client.query("SELECT id FROM items WHERE id <= 4")).rowCount).toBe(4);
      await client.end();
      await waitFor(() => impatient.ctx.registry.size === 0, 10_000, "the session to end");
      await Promise.all(impatient.ctx.releases);
      await impatient.ctx.chargeWriter.flush();
    } finally {
      await impatient.close();
    }
    // The cancelled statement returned no row; its error, the database's text, is charged as one.
    expect(await charged(agent)).toBe(costOfRows(1, PRICE) + costOfRows(4, PRICE));
    await waitFor(async () => (await upstreamSessions()) === 0, 5000, "the upstream sessions to close");
  }, 30_000);
});
