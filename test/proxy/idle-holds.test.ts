import type pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { getBalance } from "../../src/billing/ledger.js";
import type { TestDatabase } from "../support/database.js";
import {
  createProviderDatabase,
  registerPricedProvider,
  startTestGateway,
  type TestGateway,
} from "../support/gateway.js";
import { connectAgent, fundedTestAgent, type TestAgent } from "../support/proxy.js";

// One process: the wire clients connect to the proxy that `/api/query` runs on.
let gateway: TestGateway;
let providerDb: TestDatabase;
let providerId: string;

beforeAll(async () => {
  // REST sessions keep an idle hold until they close (1 s idle): what these tests take from them is not given up
  // of itself meanwhile.
  gateway = await startTestGateway({ proxy: { restIdleReleaseMs: 60_000 } });
  providerDb = await createProviderDatabase(20);
  // 1000 micro-USDC a row: a session's first hold (1000 rows) is more than these agents have, so it takes it all.
  ({ providerId } = await registerPricedProvider(gateway, providerDb.url, {
    basePricePer1000Rows: 1,
    markupMultiplier: 1,
  }));
});
afterAll(async () => {
  await gateway?.close();
  await providerDb?.drop();
});

function restQuery(agent: TestAgent, sql: string) {
  return gateway.app.inject({
    method: "POST",
    url: "/api/query",
    payload: { sql, agentWallet: agent.wallet, providerId },
  });
}

async function reservedMicro(agent: TestAgent): Promise<bigint | undefined> {
  return (await getBalance(gateway.ctx.db, agent.wallet, providerId))?.reservedMicro;
}

/** What the agent's holds leave of its balance. */
async function availableMicro(agent: TestAgent): Promise<bigint | undefined> {
  const balance = await getBalance(gateway.ctx.db, agent.wallet, providerId);
  return balance && balance.balanceMicro - balance.reservedMicro;
}

describe("an agent's funds held by its idle sessions", () => {
  it("go to its REST request when a wire session of the same process sits idle on them", async () => {
    const agent = await fundedTestAgent(gateway, providerId, 3000n);
    const wire: pg.Client = await connectAgent(gateway.proxy, agent, providerId);
    try {
      expect((await wire.query("SELECT id FROM items WHERE id = 1")).rowCount).toBe(1);
      // Idle now, and for 30 s more before it would give its hold back of itself: it holds all the agent has.
      expect(await availableMicro(agent)).toBe(0n);
      const started = performance.now();
      const rest = await restQuery(agent, "SELECT id FROM items WHERE id <= 2 ORDER BY id");
      expect(rest.statusCode, rest.body).toBe(200);
      expect(rest.json()).toMatchObject({ rowCount: 2, actualCost: "0.002000" });
      // Not after a wait for the hold to come back of itself.
      expect(performance.now() - started).toBeLessThan(1000);
      // The wire session goes on, on what is left: nothing.
      await expect(wire.query("SELECT id FROM items WHERE id = 1")).rejects.toMatchObject({ code: "PT402" });
    } finally {
      await wire.end();
    }
  });

  it("go to its wire session when its REST session sits idle on them", async () => {
    const agent = await fundedTestAgent(gateway, providerId, 3000n);
    expect((await restQuery(agent, "SELECT id FROM items WHERE id = 1")).statusCode).toBe(200);
    // The REST session keeps its hold, all the agent has left, for the agent's next request.
    expect(await availableMicro(agent)).toBe(0n);
    const wire = await connectAgent(gateway.proxy, agent, providerId);
    try {
      expect((await wire.query("SELECT id FROM items WHERE id <= 2")).rowCount).toBe(2);
    } finally {
      await wire.end();
    }
  });

  it("show as available to a balance read, given back by the idle sessions of its process", async () => {
    const agent = await fundedTestAgent(gateway, providerId, 3000n);
    expect((await restQuery(agent, "SELECT id FROM items WHERE id = 1")).statusCode).toBe(200);
    expect(await availableMicro(agent)).toBe(0n);
    const read = await gateway.app.inject({
      method: "GET",
      url: `/api/balance/${agent.wallet}/${providerId}`,
      headers: { authorization: `Bearer ${await agent.token()}` },
    });
    expect(read.statusCode, read.body).toBe(200);
    expect(read.json()).toMatchObject({ balance: "0.002000", available: "0.002000" });
  });

  it("come back once the REST session has been idle a moment, in any process", async () => {
    // Read as each session starts: REST's sessions from here on give their holds back after the default.
    gateway.proxy.ctx.restIdleReleaseMs = undefined;
    const agent = await fundedTestAgent(gateway, providerId, 3000n);
    expect((await restQuery(agent, "SELECT id FROM items WHERE id = 1")).statusCode).toBe(200);
    await expect.poll(() => reservedMicro(agent), { timeout: 900, interval: 20 }).toBe(0n);
  });
});
