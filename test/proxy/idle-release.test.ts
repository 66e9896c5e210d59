import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { getBalance } from "../../src/billing/ledger.js";
import type { TestDatabase } from "../support/database.js";
import {
  createProviderDatabase,
  registerPricedProvider,
  startTestGateway,
  type TestGateway,
} from "../support/gateway.js";
import { fundedTestAgent, startTestProxy, type TestAgent, type TestProxy } from "../support/proxy.js";

/*
 * A session holds a reservation while it works and gives it back after `idleReleaseMs` without a statement
 * outside a transaction; activity in between keeps it.
 */

const IDLE_RELEASE_MS = 400;

let gateway: TestGateway;
let proxy: TestProxy;
let providerDb: TestDatabase;
let providerId: string;
let agent: TestAgent;

beforeAll(async () => {
  gateway = await startTestGateway();
  proxy = await startTestProxy(gateway, { idleReleaseMs: IDLE_RELEASE_MS });
  providerDb = await createProviderDatabase(10);
  ({ providerId } = await registerPricedProvider(gateway, providerDb.url, {
    basePricePer1000Rows: 1,
    markupMultiplier: 1,
  }));
  agent = await fundedTestAgent(gateway, providerId, 10_000_000n);
});
afterAll(async () => {
  await proxy?.close();
  await gateway?.close();
  await providerDb?.drop();
});

const reserved = async () => (await getBalance(gateway.ctx.db, agent.wallet, providerId)).reservedMicro;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe("idle release", () => {
  it("keeps the reservation of a busy session and gives it back once the session is idle", async () => {
    const client = new pg.Client({
      host: "127.0.0.1",
      port: proxy.port,
      user: agent.wallet,
      database: providerId,
      password: await agent.token(),
    });
    await client.connect();
    try {
      await client.query("SELECT id FROM items WHERE id = 1");
      expect(await reserved()).toBeGreaterThan(0n);
      // Statements closer together than IDLE_RELEASE_MS, for well over IDLE_RELEASE_MS.
      for (let i = 0; i < 8; i++) {
        await sleep(IDLE_RELEASE_MS / 4);
        await client.query("SELECT id FROM items WHERE id = $1", [i + 1]);
      }
      expect(await reserved()).toBeGreaterThan(0n);
      // An open transaction is not idle.
      await client.query("BEGIN");
      await sleep(IDLE_RELEASE_MS * 2);
      expect(await reserved()).toBeGreaterThan(0n);
      await client.query("COMMIT");
      await sleep(IDLE_RELEASE_MS * 2.5);
      expect(await reserved()).toBe(0n);
      // The next statement reserves again.
      expect((await client.query("SELECT id FROM items WHERE id = 2")).rows).toEqual([{ id: 2 }]);
      expect(await reserved()).toBeGreaterThan(0n);
    } finally {
      await client.end();
    }
  });
});
