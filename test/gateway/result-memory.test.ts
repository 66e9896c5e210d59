import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { getBalance, listLedgerEntries } from "../../src/billing/ledger.js";
import type { TestDatabase } from "../support/database.js";
import { depositFor } from "../support/fixtures.js";
import {
  createProviderDatabase,
  registerPricedProvider,
  startTestGateway,
  type TestGateway,
} from "../support/gateway.js";

const MIB = 1024 * 1024;
let gateway: TestGateway;
let providerDb: TestDatabase;
let providerId: string;

beforeAll(async () => {
  gateway = await startTestGateway({
    env: { PGTOLL_MAX_RESULT_BYTES: String(MIB), PGTOLL_MAX_RESULTS_IN_MEMORY: String(2 * MIB) },
  });
  providerDb = await createProviderDatabase(20);
  ({ providerId } = await registerPricedProvider(gateway, providerDb.url));
});
afterAll(async () => {
  await gateway?.close();
  await providerDb?.drop();
});

const fundedAgent = () => depositFor(gateway.ctx.db, providerId, 10_000_000n);

function query(agentWallet: string, sql: string) {
  return gateway.app.inject({
    method: "POST",
    url: "/api/query",
    payload: { sql, agentWallet, providerId },
  });
}

describe("the result memory of all REST requests together (PGTOLL_MAX_RESULTS_IN_MEMORY)", () => {
  it("refuses a request whose rows would pass it with 503, and serves it once the memory is free", async () => {
    const memory = gateway.ctx.upstream.resultMemory;
    const agent = await fundedAgent();
    // Other requests hold all but 100 kB of the 2 MiB.
    const others = 2 * MIB - 100_000;
    expect(memory.take(others)).toBe(true);
    for (const sql of [
      // Rows of 50 kB each, counted as they arrive: the fourth passes the limit.
      "SELECT repeat('x', 50000) AS v FROM generate_series(1, 4)",
      // One row of 200 kB.
      "SELECT repeat('x', 200000) AS v",
    ]) {
      const refused = await query(agent, sql);
      expect(refused.statusCode).toBe(503);
      expect(refused.json().code).toBe("results_memory_full");
      expect(refused.json().error).toContain("PGTOLL_MAX_RESULTS_IN_MEMORY");
      expect(memory.heldBytes).toBe(others);
    }
    // A small result still fits.
    expect((await query(agent, "SELECT 1 AS one")).statusCode).toBe(200);
    memory.give(others);
    const served = await query(agent, "SELECT repeat('x', 200000) AS v");
    expect(served.statusCode).toBe(200);
    expect(served.json().rows[0].v).toHaveLength(200_000);
    // What a request held is given back once it is answered.
    expect(memory.heldBytes).toBe(0);
    const balance = await getBalance(gateway.ctx.db, agent, providerId);
    // What was charged is what the ledger says: the rows relayed before a refusal, and the answered rows.
    expect(10_000_000n - balance.balanceMicro).toBe(
      (await listLedgerEntries(gateway.ctx.db, agent, { providerId, limit: 100 }))
        .filter((entry) => entry.type === "query")
        .reduce((sum, entry) => sum - entry.amountMicro, 0n),
    );
  });
});
