import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type OwnedTestDatabase, runSql } from "../support/database.js";
import {
  createProviderDatabase,
  registerPricedProvider,
  startTestGateway,
  type TestGateway,
} from "../support/gateway.js";
import { connectAgent, fundedTestAgent, startTestProxy, type TestProxy } from "../support/proxy.js";
import { missingTool, runProcess } from "../support/real-clients.js";

/*
 * A provider's connection string may carry `options` (`-c search_path=...`): every wire session starts with them,
 * as REST's pool connections do, and pgtoll's own settings still win over them.
 */

const PSQL = "/usr/bin/psql";
const psqlMissing = missingTool(PSQL, "apt-get install postgresql-client");

let gateway: TestGateway;
let proxy: TestProxy;
let providerDb: OwnedTestDatabase;
let providerId: string;

beforeAll(async () => {
  gateway = await startTestGateway();
  proxy = await startTestProxy(gateway);
  providerDb = await createProviderDatabase(5);
  await runSql(
    `CREATE SCHEMA myschema; CREATE TABLE myschema.widgets (id int PRIMARY KEY, name text NOT NULL);
     INSERT INTO myschema.widgets VALUES (1, 'sprocket'), (2, 'flange');`,
    providerDb.url,
  );
  const url = new URL(providerDb.url);
  // pgtoll's statement_timeout (10 s here) and lock_timeout must replace the provider's.
  url.searchParams.set("options", "-c search_path=myschema -c statement_timeout=1234567 -c lock_timeout=0");
  ({ providerId } = await registerPricedProvider(gateway, url.toString()));
});
afterAll(async () => {
  await proxy?.close();
  await gateway?.close();
  await providerDb?.drop();
});

describe("a provider's connection-string options on the wire", () => {
  it("put the provider's schema first for a node-postgres session, under pgtoll's own timeouts", async () => {
    const agent = await fundedTestAgent(gateway, providerId, 1_000_000n);
    const client = await connectAgent(proxy, agent, providerId);
    try {
      const { rows } = await client.query("SELECT name FROM widgets ORDER BY id");
      expect(rows.map((row) => row.name)).toEqual(["sprocket", "flange"]);
      const settings = await client.query(
        "SELECT current_setting('search_path') AS search_path, current_setting('statement_timeout') AS statement_timeout, current_setting('lock_timeout') AS lock_timeout",
      );
      expect(settings.rows[0]).toMatchObject({ search_path: "myschema", statement_timeout: "10s" });
      expect(settings.rows[0].lock_timeout).not.toBe("0");
    } finally {
      await client.end();
    }
  });

  it("cannot be replaced by an agent's startup options", async () => {
    const agent = await fundedTestAgent(gateway, providerId, 1_000_000n);
    await expect(
      connectAgent(proxy, agent, providerId, { options: "-c options=-csearch_path=public" }),
    ).rejects.toThrow(/setting "options" at connect time is not allowed/);
    await expect(
      connectAgent(proxy, agent, providerId, { options: "-c statement_timeout=0" }),
    ).rejects.toThrow(/setting "statement_timeout" at connect time is not allowed/);
  });

  it.skipIf(psqlMissing !== null)("put the provider's schema first for psql", async () => {
    const agent = await fundedTestAgent(gateway, providerId, 1_000_000n);
    const result = await runProcess(PSQL, ["-X", "-A", "-t", "-c", "SELECT name FROM widgets WHERE id = 2"], {
      env: {
        PGPASSWORD: await agent.token(),
        PGHOST: "127.0.0.1",
        PGPORT: String(proxy.port),
        PGUSER: agent.wallet,
        PGDATABASE: providerId,
        PGSSLMODE: "disable",
        PGCONNECT_TIMEOUT: "5",
      },
      timeoutMs: 15_000,
    });
    expect(result.stderr).toBe("");
    expect(result.stdout.trim()).toBe("flange");
  });
});
