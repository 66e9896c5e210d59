import { execFileSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { TestDatabase } from "../support/database.js";
import {
  createProviderDatabase,
  registerPricedProvider,
  startTestGateway,
  type TestGateway,
} from "../support/gateway.js";
import { fundedTestAgent, startTestProxy, type TestProxy } from "../support/proxy.js";
import {
  expectChargedPerStatement,
  missingTool,
  ODD_PRICING,
  runProcess,
  waitForCharges,
} from "../support/real-clients.js";

/** Debian's pgjdbc (libpostgresql-jdbc-java), run by Java's single-file source launcher. */
const JDBC_JAR = "/usr/share/java/postgresql.jar";
const PROGRAM = fileURLToPath(new URL("./jdbc/JdbcWrites.java", import.meta.url));

function javaMissing(): string | null {
  try {
    execFileSync("java", ["-version"], { stdio: "ignore" });
  } catch {
    return "java is not installed (apt-get install default-jdk-headless; .ci/run installs it)";
  }
  return missingTool(JDBC_JAR, "apt-get install libpostgresql-jdbc-java");
}
const skipReason = javaMissing();
if (skipReason) console.warn(`skipping pgjdbc tests: ${skipReason}`);

let gateway: TestGateway;
let proxy: TestProxy;
let providerDb: TestDatabase;
let providerId: string;
const FUNDS = 1_000_000n;

describe.skipIf(skipReason !== null)("pgjdbc through the proxy", () => {
  beforeAll(async () => {
    gateway = await startTestGateway();
    proxy = await startTestProxy(gateway);
    providerDb = await createProviderDatabase(30);
    ({ providerId } = await registerPricedProvider(gateway, providerDb.url, ODD_PRICING));
  });
  afterAll(async () => {
    await proxy?.close();
    await gateway?.close();
    await providerDb?.drop();
  });

  it("executeUpdate in autocommit and in a transaction, a prepared INSERT, executeBatch and getGeneratedKeys write, and each write is charged its rows", async () => {
    const agent = await fundedTestAgent(gateway, providerId, FUNDS);
    const run = await runProcess("java", ["-cp", JDBC_JAR, PROGRAM], {
      env: {
        PGTOLL_JDBC_URL: `jdbc:postgresql://127.0.0.1:${proxy.port}/${providerId}`,
        PGTOLL_JDBC_USER: agent.wallet,
        PGTOLL_JDBC_PASSWORD: await agent.token(),
      },
      timeoutMs: 60_000,
    });
    expect(run.stderr).toBe("");
    const out = JSON.parse(run.stdout);
    expect(out).toEqual({
      autocommitUpdated: 3,
      transactionUpdated: 1,
      preparedInserted: 1,
      returnedInBatches: "[6, 7, 8, 9, 10]",
      batchCounts: "[1, 1, 1]",
      generatedInserted: 1,
      generatedKey: 31,
      generatedManyInserted: 3,
      generatedKeys: "[32, 33, 34]",
    });
    expect(run.code).toBe(0);

    const db = new pg.Client({ connectionString: providerDb.url });
    await db.connect();
    try {
      const items = await db.query<{ id: number; name: string }>(
        "SELECT id, name FROM items WHERE id <= 10 OR id > 30 ORDER BY id",
      );
      expect(items.rows.map((r) => `${r.id}:${r.name}`)).toEqual([
        "1:item 1-a",
        "2:item 2-a",
        "3:item 3-a",
        "4:in-tx",
        "5:item 5",
        ...[6, 7, 8, 9, 10].map((id) => `${id}:item ${id}-r`),
        "31:jdbc-key",
        "32:jdbc-keys",
        "33:jdbc-keys",
        "34:jdbc-keys",
      ]);
      const orders = await db.query<{ item_id: number; name: string }>(
        "SELECT item_id, name FROM orders WHERE name LIKE 'jdbc-%' ORDER BY id",
      );
      expect(orders.rows.map((r) => `${r.item_id}:${r.name}`)).toEqual([
        "4:jdbc-prepared",
        "1:jdbc-batch",
        "2:jdbc-batch",
        "3:jdbc-batch",
      ]);
    } finally {
      await db.end();
    }

    await waitForCharges(proxy);
    // Each write is charged its affected rows (its RETURNING rows, when they are more).
    await expectChargedPerStatement(gateway, agent, providerId, FUNDS, [
      { rows: 3, sql: "UPDATE items SET name = name || '-a' WHERE id <= 3" },
      { rows: 1, sql: "UPDATE items SET name = 'in-tx' WHERE id = 4" },
      { rows: 1 },
      { rows: 5, sql: "UPDATE items SET name = name || '-r' WHERE id >= 6 AND id <= 10 RETURNING id" },
      { rows: 1 },
      { rows: 1 },
      { rows: 1 },
      { rows: 1 },
      { rows: 3 },
    ]);
  });
});
