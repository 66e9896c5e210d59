import { execFileSync } from "node:child_process";
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
  ODD_PRICING,
  runProcess,
  waitForCharges,
} from "../support/real-clients.js";

/** Debian's interpreter: python3-psycopg2 installs there, not into a PATH python3 that may be another one. */
const PYTHON = "/usr/bin/python3";

function psycopg2Missing(): string | null {
  try {
    execFileSync(PYTHON, ["-c", "import psycopg2"], { stdio: "ignore" });
    return null;
  } catch {
    return `${PYTHON} cannot import psycopg2 (apt-get install python3-psycopg2; .ci/run installs it)`;
  }
}
const skipReason = psycopg2Missing();
if (skipReason) console.warn(`skipping psycopg2 tests: ${skipReason}`);

/**
 * The agent's program: connects with libpq's environment variables and prints what it saw as JSON. psycopg2
 * speaks the simple protocol, interpolating parameters client side, and opens a transaction (BEGIN) before
 * the first statement unless autocommit is on.
 */
const SCRIPT = `
import json, threading, time
import psycopg2, psycopg2.errors

out = {}
conn = psycopg2.connect("")
cur = conn.cursor()

cur.execute("SELECT id, name FROM items WHERE id = %s OR name = %s ORDER BY id", (3, "item 5"))
out["params"] = cur.fetchall()
cur.execute("UPDATE items SET name = name WHERE id = ANY(%s)", ([1, 2, 3],))
out["updated"] = cur.rowcount
conn.commit()

with conn.cursor(name="walk") as named:
    named.itersize = 7
    named.execute("SELECT id FROM items WHERE id <= %s ORDER BY id", (25,))
    out["walked"] = [row[0] for row in named]
conn.commit()

try:
    cur.execute("DROP TABLE items")
except psycopg2.Error as e:
    out["denied"] = {"pgcode": e.pgcode, "type": type(e).__name__, "message": e.pgerror}
try:
    cur.execute("SELECT 1")
except psycopg2.Error as e:
    out["after_denied"] = {"pgcode": e.pgcode, "type": type(e).__name__}
conn.rollback()

conn.autocommit = True
cancelled_at = []
def cancel():
    cancelled_at.append(time.monotonic())
    conn.cancel()
timer = threading.Timer(0.5, cancel)
timer.start()
try:
    cur.execute("SELECT pg_sleep(20)")
except psycopg2.Error as e:
    seconds = time.monotonic() - cancelled_at[0]
    out["cancelled"] = {"pgcode": e.pgcode, "type": type(e).__name__, "message": e.pgerror, "seconds": seconds}
timer.join()
cur.execute("SELECT 6 * 7")
out["after_cancel"] = cur.fetchone()[0]
out["status"] = conn.status
conn.close()
print(json.dumps(out))
`;

let gateway: TestGateway;
let proxy: TestProxy;
let providerDb: TestDatabase;
let providerId: string;
const FUNDS = 1_000_000n;

describe.skipIf(skipReason !== null)("psycopg2 through the proxy", () => {
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

  it("queries with parameters, walks a named cursor, gets 42501 for a denied statement and cancels with conn.cancel()", async () => {
    const agent = await fundedTestAgent(gateway, providerId, FUNDS);
    const result = await runProcess(PYTHON, ["-c", SCRIPT], {
      env: {
        PGHOST: "127.0.0.1",
        PGPORT: String(proxy.port),
        PGUSER: agent.wallet,
        PGDATABASE: providerId,
        PGPASSWORD: await agent.token(),
        PGSSLMODE: "disable",
      },
      timeoutMs: 30_000,
    });
    expect(result.stderr).toBe("");
    expect(result.code).toBe(0);
    const out = JSON.parse(result.stdout);
    expect(out.params).toEqual([
      [3, "item 3"],
      [5, "item 5"],
    ]);
    expect(out.updated).toBe(3);
    expect(out.walked).toEqual(Array.from({ length: 25 }, (_, i) => i + 1));
    expect(out.denied).toMatchObject({
      pgcode: "42501",
      type: "InsufficientPrivilege",
      message: expect.stringMatching(/no-drop/),
    });
    expect(out.after_denied).toEqual({ pgcode: "25P02", type: "InFailedSqlTransaction" });
    expect(out.cancelled).toMatchObject({
      pgcode: "57014",
      type: "QueryCanceled",
      message: expect.stringContaining("canceling statement due to user request"),
    });
    expect(out.cancelled.seconds).toBeLessThan(2);
    expect(out.after_cancel).toBe(42);

    await waitForCharges(proxy);
    await expectChargedPerStatement(gateway, agent, providerId, FUNDS, [
      { rows: 2, sql: "SELECT id, name FROM items WHERE id = 3 OR name = 'item 5' ORDER BY id" },
      { rows: 3, sql: "UPDATE items SET name = name WHERE id = ANY(ARRAY[1,2,3])" },
      // The named cursor is fetched `itersize` rows at a time until a short batch.
      { rows: 7, sql: /^FETCH FORWARD 7 FROM "walk"$/ },
      { rows: 7 },
      { rows: 7 },
      { rows: 4 },
      // A database error is text from the database: each is charged as one row.
      { rows: 1, sql: "SELECT 1" },
      { rows: 1, sql: "SELECT pg_sleep(20)" },
      { rows: 1, sql: "SELECT 6 * 7" },
    ]);
  });
});
