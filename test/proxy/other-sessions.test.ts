import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { OwnedTestDatabase } from "../support/database.js";
import { runSql } from "../support/database.js";
import {
  createProviderDatabase,
  registerPricedProvider,
  startTestGateway,
  type TestGateway,
} from "../support/gateway.js";
import { connectAgent, fundedTestAgent, startTestProxy, type TestProxy } from "../support/proxy.js";

let gateway: TestGateway;
let proxy: TestProxy;
let providerDb: OwnedTestDatabase;
let providerId: string;

beforeAll(async () => {
  gateway = await startTestGateway();
  proxy = await startTestProxy(gateway);
  providerDb = await createProviderDatabase(20);
  ({ providerId } = await registerPricedProvider(gateway, providerDb.url));
});
afterAll(async () => {
  await proxy?.close();
  await gateway?.close();
  await providerDb?.drop();
});

/** What agent A tries, while agent B's statement runs, to read B's SQL. */
const SPYING = [
  "SELECT query FROM pg_stat_activity WHERE pid <> pg_backend_pid()",
  'SELECT "query" FROM "pg_catalog"."pg_stat_activity"',
  "WITH a AS (SELECT * FROM pg_catalog.pg_stat_activity) SELECT query FROM a",
  "SELECT * FROM items WHERE name IN (SELECT query FROM pg_stat_activity)",
  "SELECT pg_stat_get_backend_activity(i) FROM pg_stat_get_backend_idset() AS s(i)",
  "SELECT (pg_stat_get_activity(NULL)).query",
  "SELECT * FROM pg_locks",
  "SELECT pg_blocking_pids(pid) FROM (SELECT 1 AS pid) p",
];

describe("agents of one provider cannot read each other's statements", () => {
  it("agent A cannot see agent B's running statement through the wire proxy, in any spelling", async () => {
    const a = await connectAgent(proxy, await fundedTestAgent(gateway, providerId, 1_000_000n), providerId);
    const b = await connectAgent(proxy, await fundedTestAgent(gateway, providerId, 1_000_000n), providerId);
    try {
      const running = b.query("SELECT pg_sleep(2), 'secret-literal-7421' AS s");
      // B's statement is there to be seen: the provider's role would show it, literal and all.
      await expect
        .poll(
          async () =>
            (
              await runSql(
                "SELECT count(*)::int AS n FROM pg_stat_activity WHERE query LIKE '%secret-literal-7421%' AND query NOT LIKE '%pg_stat_activity%'",
                providerDb.adminUrl,
              )
            )[0]?.n,
          { timeout: 1500, interval: 50 },
        )
        .toBe(1);
      for (const sql of SPYING) {
        const error = await a.query(sql).then(
          (result) => ({ leaked: JSON.stringify(result.rows) }),
          (e: { code?: string; message: string }) => e,
        );
        expect(error, sql).toMatchObject({ code: "42501", message: expect.stringMatching(/other-sessions/) });
      }
      // The session stays usable, and cumulative counters stay readable.
      expect((await a.query("SELECT numbackends >= 0 AS ok FROM pg_stat_database LIMIT 1")).rows).toEqual([
        { ok: true },
      ]);
      expect((await running).rows[0].s).toBe("secret-literal-7421");
    } finally {
      await a.end();
      await b.end();
    }
  }, 30_000);

  it("POST /api/query refuses the same reads", async () => {
    const agent = await fundedTestAgent(gateway, providerId, 1_000_000n);
    const answer = await gateway.app.inject({
      method: "POST",
      url: "/api/query",
      payload: { sql: SPYING[0], agentWallet: agent.wallet, providerId },
    });
    expect(answer.statusCode).toBe(403);
    expect(answer.json().error).toMatch(/other-sessions|other sessions/);
  });
});
