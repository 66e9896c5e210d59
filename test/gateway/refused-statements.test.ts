import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { getBalance, listLedgerEntries } from "../../src/billing/ledger.js";
import { pipelineQueryError, STATUS_BY_SQLSTATE, statusForSqlState } from "../../src/rest/query-errors.js";
import { type OwnedTestDatabase, runSql } from "../support/database.js";
import {
  createProviderDatabase,
  registerPricedProvider,
  startTestGateway,
  type TestGateway,
} from "../support/gateway.js";
import { fundedTestAgent, type TestAgent } from "../support/proxy.js";

let gateway: TestGateway;
let providerDb: OwnedTestDatabase;
let providerId: string;

beforeAll(async () => {
  gateway = await startTestGateway({ env: { PGTOLL_STATEMENT_TIMEOUT_MS: "300" } });
  providerDb = await createProviderDatabase(10);
  // orders.item_id references items; `secret` belongs to another role, so the provider's role may not read it.
  await runSql(
    `ALTER TABLE orders ADD CONSTRAINT orders_item_fk FOREIGN KEY (item_id) REFERENCES items (id);
     CREATE TABLE secret (id int PRIMARY KEY);`,
    providerDb.adminUrl,
  );
  ({ providerId } = await registerPricedProvider(gateway, providerDb.url));
});
afterAll(async () => {
  await gateway?.close();
  await providerDb?.drop();
});

async function run(agent: TestAgent, sql: string) {
  return gateway.app.inject({
    method: "POST",
    url: "/api/query",
    payload: { sql, agentWallet: agent.wallet, providerId },
  });
}

const refusals: [string, string, number, string, RegExp][] = [
  [
    "an undefined table",
    "SELECT * FROM no_such_table",
    400,
    "42P01",
    /relation "no_such_table" does not exist/,
  ],
  [
    "an undefined column",
    "SELECT no_such_column FROM items",
    400,
    "42703",
    /column "no_such_column" does not exist/,
  ],
  [
    "a foreign-key violation",
    "DELETE FROM items WHERE id = ANY('{1,2}'::int[])",
    400,
    "23503",
    /violates foreign key constraint "orders_item_fk"/,
  ],
  ["a unique violation", "INSERT INTO items (id, name) VALUES (1, 'again')", 400, "23505", /duplicate key/],
  ["a division by zero", "SELECT 1 / (id - id) FROM items WHERE id = 1", 400, "22012", /division by zero/],
  ["a permission denied", "SELECT * FROM secret", 403, "42501", /permission denied for table secret/],
];

describe("POST /api/query: statements the database refuses", () => {
  it.each(refusals)(
    "%s: the status of its class, PostgreSQL's message and its SQLSTATE in `code`",
    async (_what, sql, status, code, message) => {
      const agent = await fundedTestAgent(gateway, providerId, 1_000_000n);
      const res = await run(agent, sql);
      expect(res.statusCode, res.body).toBe(status);
      const body = res.json();
      expect(Object.keys(body).sort()).toEqual(["code", "error"]);
      expect(body.code).toBe(code);
      expect(body.error).toMatch(/^the database refused the statement: /);
      expect(body.error).toMatch(message);
      expect(body.error).toContain(`(SQLSTATE ${code})`);
      // The database's error text is charged as one row (1000 micro-USDC here).
      expect((await getBalance(gateway.ctx.db, agent.wallet, providerId)).balanceMicro).toBe(
        1_000_000n - 1_000n,
      );
      const entries = await listLedgerEntries(gateway.ctx.db, agent.wallet, { providerId, limit: 10 });
      expect(entries.map((e) => [e.type, e.metadata.rowCount])).toEqual([
        ["query", 1],
        ["deposit", undefined],
      ]);
    },
  );

  it("a statement timeout is 500 query execution failed, naming the timeout, with code 57014", async () => {
    const agent = await fundedTestAgent(gateway, providerId, 1_000_000n);
    const res = await run(agent, "SELECT pg_sleep(2)");
    expect(res.statusCode).toBe(500);
    expect(res.json()).toEqual({
      error: "query execution failed: cancelled after the 0.3 s statement timeout",
      code: "57014",
    });
    // Charged as any error the database raised: one row.
    expect((await getBalance(gateway.ctx.db, agent.wallet, providerId)).balanceMicro).toBe(
      1_000_000n - 1_000n,
    );
  });

  it("text that does not parse stays 400 invalid SQL, without a code (the guard's verdict, nothing ran)", async () => {
    const agent = await fundedTestAgent(gateway, providerId, 1_000_000n);
    const res = await run(agent, "SELEC 1");
    expect(res.statusCode).toBe(400);
    expect(res.json()).toEqual({
      error: expect.stringMatching(/^invalid SQL: syntax error at or near "SELEC"/),
    });
  });
});

describe("the SQLSTATE table", () => {
  it("maps a full code before its class, and anything unlisted to 500", () => {
    expect(statusForSqlState("42501")).toBe(403);
    expect(statusForSqlState("42P01")).toBe(400);
    expect(statusForSqlState("25006")).toBe(403);
    expect(statusForSqlState("25P02")).toBe(400);
    expect(statusForSqlState("53300")).toBe(500);
    expect(statusForSqlState("XX000")).toBe(500);
    expect(Object.values(STATUS_BY_SQLSTATE).every((s) => [400, 403].includes(s))).toBe(true);
  });

  it("keeps an error without a SQLSTATE as a 500 with no code", () => {
    const error = pipelineQueryError({ message: "Connection terminated unexpectedly" });
    expect([error.statusCode, error.message, error.sqlState]).toEqual([
      500,
      "query execution failed: Connection terminated unexpectedly",
      undefined,
    ]);
  });
});
