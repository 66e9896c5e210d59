import { spawnSync } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { TestDatabase } from "../support/database.js";
import {
  createProviderDatabase,
  registerPricedProvider,
  startTestGateway,
  type TestGateway,
} from "../support/gateway.js";
import { fundedTestAgent, startTestProxy, type TestAgent, type TestProxy } from "../support/proxy.js";
import {
  expectChargedPerStatement,
  missingTool,
  ODD_PRICING,
  runProcess,
  waitFor,
  waitForCharges,
} from "../support/real-clients.js";

const PSQL = "/usr/bin/psql";
/** The provider's view of the proxied session running pg_sleep. */
const SLEEPING =
  "SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'SELECT pg_sleep(20)%' AND state = 'active'";
const TMUX = "/usr/bin/tmux";
const skipReason = missingTool(PSQL, "apt-get install postgresql-client");
if (skipReason) console.warn(`skipping psql tests: ${skipReason}`);

let gateway: TestGateway;
let proxy: TestProxy;
let providerDb: TestDatabase;
let providerId: string;
let dir: string;
const FUNDS = 1_000_000n;

/** libpq's environment for a psql session of `agent` through the proxy, over loopback without TLS. */
async function psqlEnv(agent: TestAgent): Promise<Record<string, string>> {
  return {
    PGPASSWORD: await agent.token(),
    PGHOST: "127.0.0.1",
    PGPORT: String(proxy.port),
    PGUSER: agent.wallet,
    PGDATABASE: providerId,
    PGSSLMODE: "disable",
    PGCONNECT_TIMEOUT: "5",
  };
}

/** psql without ~/.psqlrc, printing SQLSTATEs in its error lines (VERBOSITY=verbose). */
async function psql(agent: TestAgent, args: string[]) {
  return runProcess(PSQL, ["-X", "-v", "VERBOSITY=verbose", ...args], {
    env: await psqlEnv(agent),
    timeoutMs: 15_000,
  });
}

describe.skipIf(skipReason !== null)("psql through the proxy", () => {
  beforeAll(async () => {
    gateway = await startTestGateway();
    proxy = await startTestProxy(gateway);
    providerDb = await createProviderDatabase(40);
    ({ providerId } = await registerPricedProvider(gateway, providerDb.url, ODD_PRICING));
    dir = await mkdtemp(join(tmpdir(), "pgtoll-psql-"));
  });
  afterAll(async () => {
    await proxy?.close();
    await gateway?.close();
    await providerDb?.drop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it("runs -c queries and charges each statement by the cost rule", async () => {
    const agent = await fundedTestAgent(gateway, providerId, FUNDS);
    const result = await psql(agent, [
      "-A",
      "-t",
      "-c",
      "SELECT id, name FROM items WHERE id <= 3 ORDER BY id",
      "-c",
      "SELECT count(*) FROM items",
      "-c",
      "UPDATE items SET name = name WHERE id BETWEEN 10 AND 14",
      "-c",
      "SELECT 1 WHERE false",
    ]);
    expect(result.stderr).toBe("");
    expect(result.code).toBe(0);
    expect(result.stdout.trim().split("\n")).toEqual(["1|item 1", "2|item 2", "3|item 3", "40", "UPDATE 5"]);
    await waitForCharges(proxy);
    await expectChargedPerStatement(gateway, agent, providerId, FUNDS, [
      { rows: 3, sql: "SELECT id, name FROM items WHERE id <= 3 ORDER BY id" },
      { rows: 1, sql: "SELECT count(*) FROM items" },
      { rows: 5, sql: "UPDATE items SET name = name WHERE id BETWEEN 10 AND 14" },
      { rows: 0 },
    ]);
  });

  it("describes tables with \\d items and \\dt: psql's catalog queries pass the guard and are charged per row", async () => {
    const agent = await fundedTestAgent(gateway, providerId, FUNDS);
    // -E (ECHO_HIDDEN) prints each catalog query psql sends, so the test can run them itself and know their rows.
    const result = await psql(agent, ["-E", "-c", "\\d items", "-c", "\\dt"]);
    expect(result.stderr).toBe("");
    expect(result.code).toBe(0);
    expect(result.stdout).toContain('Table "public.items"');
    expect(result.stdout).toMatch(/ id +\| integer +\| +\| not null \| nextval\('items_id_seq'::regclass\)/);
    expect(result.stdout).toMatch(/ name +\| text +\| +\| not null \|/);
    expect(result.stdout).toContain('"items_pkey" PRIMARY KEY, btree (id)');
    expect(result.stdout).toMatch(
      /List of relations[\s\S]* public \| items +\| table \|[\s\S]* public \| orders +\| table \|[\s\S]*\(2 rows\)/,
    );

    const hidden = [...result.stdout.matchAll(/\*{9} QUERY \*{10}\n([\s\S]*?)\n\*{26}/g)].map((m) =>
      m[1]!.replace(/;\s*$/, ""),
    );
    expect(hidden.length).toBeGreaterThanOrEqual(5);
    const direct = new pg.Client({ connectionString: providerDb.url });
    await direct.connect();
    const rowCounts: number[] = [];
    try {
      for (const sql of hidden) rowCounts.push((await direct.query(sql)).rows.length);
    } finally {
      await direct.end();
    }
    await waitForCharges(proxy);
    const entries = await expectChargedPerStatement(
      gateway,
      agent,
      providerId,
      FUNDS,
      rowCounts.map((rows, i) => ({ rows, sql: hidden[i] })),
    );
    for (const entry of entries)
      for (const shape of entry.metadata.shapes as { sample: string }[]) {
        // A sample is the text, cut at 200 characters: each is one of psql's catalog queries.
        const prefix = shape.sample.replace(/…$/, "");
        expect(hidden.some((sql) => sql.startsWith(prefix))).toBe(true);
      }
  });

  it("answers a denied statement with ERROR 42501 and goes on with the script (ON_ERROR_STOP=0)", async () => {
    const agent = await fundedTestAgent(gateway, providerId, FUNDS);
    const script = join(dir, "script.sql");
    await writeFile(
      script,
      [
        "SELECT 'before' AS step;",
        "DROP TABLE items;",
        "SELECT name FROM items WHERE id = 2;",
        "BEGIN;",
        "SELECT id FROM items WHERE id <= 2 ORDER BY id;",
        "TRUNCATE items;",
        "SELECT 'in a failed transaction';",
        "ROLLBACK;",
        "SELEC 1;",
        "SELECT count(*) AS n FROM items;",
        "",
      ].join("\n"),
    );
    const result = await psql(agent, ["-A", "-t", "-v", "ON_ERROR_STOP=0", "-f", script]);
    expect(result.code).toBe(0);
    expect(result.stdout.trim().split("\n")).toEqual([
      "before",
      "item 2",
      "BEGIN",
      "1",
      "2",
      "ROLLBACK",
      "40",
    ]);
    const errors = result.stderr
      .trim()
      .split("\n")
      .filter((line) => line.includes("ERROR:"));
    expect(errors).toEqual([
      expect.stringMatching(
        /script\.sql:2: ERROR: {2}42501: pgtoll policy: statement not allowed \(no-drop\)/,
      ),
      expect.stringMatching(/script\.sql:6: ERROR: {2}42501: pgtoll policy: statement not allowed/),
      expect.stringMatching(/script\.sql:7: ERROR: {2}25P02: current transaction is aborted/),
      expect.stringMatching(/script\.sql:9: ERROR: {2}42601: pgtoll policy: invalid SQL/),
    ]);
    const check = new pg.Client({ connectionString: providerDb.url });
    await check.connect();
    expect((await check.query("SELECT count(*)::int AS n FROM items")).rows[0].n).toBe(40);
    await check.end();
    await waitForCharges(proxy);
    await expectChargedPerStatement(gateway, agent, providerId, FUNDS, [
      { rows: 1, sql: "SELECT 'before' AS step" },
      { rows: 1, sql: "SELECT name FROM items WHERE id = 2" },
      { rows: 2, sql: "SELECT id FROM items WHERE id <= 2 ORDER BY id" },
      // The database's error text is charged as a row; pgtoll's own refusals are not.
      { rows: 1, sql: "SELECT 'in a failed transaction'" },
      { rows: 1, sql: "SELECT count(*) AS n FROM items" },
    ]);
  });

  it("copies out with COPY ... TO STDOUT and \\copy, charging the rows sent, and refuses COPY FROM", async () => {
    const agent = await fundedTestAgent(gateway, providerId, FUNDS);
    const result = await psql(agent, [
      "-c",
      "\\copy (SELECT id, name FROM items WHERE id <= 4 ORDER BY id) TO STDOUT WITH (FORMAT csv)",
      "-c",
      "COPY (SELECT id FROM items WHERE id BETWEEN 11 AND 17 ORDER BY id) TO STDOUT",
    ]);
    expect(result.stderr).toBe("");
    expect(result.stdout.trim().split("\n")).toEqual([
      "1,item 1",
      "2,item 2",
      "3,item 3",
      "4,item 4",
      ...Array.from({ length: 7 }, (_, i) => String(11 + i)),
    ]);
    const copyIn = await runProcess(
      PSQL,
      ["-X", "-v", "VERBOSITY=verbose", "-c", "\\copy orders (item_id) FROM STDIN"],
      {
        env: await psqlEnv(agent),
        input: "1\n2\n\\.\n",
      },
    );
    expect(copyIn.stderr).toMatch(/ERROR: {2}42501: pgtoll policy: statement not allowed \(no-copy-from\)/);
    await waitForCharges(proxy);
    await expectChargedPerStatement(gateway, agent, providerId, FUNDS, [
      { rows: 4, sql: /^COPY +\( SELECT id, name FROM items WHERE id <= 4 ORDER BY id \) TO STDOUT/ },
      { rows: 7, sql: "COPY (SELECT id FROM items WHERE id BETWEEN 11 AND 17 ORDER BY id) TO STDOUT" },
    ]);
  });

  const tmuxMissing = missingTool(TMUX, "apt-get install tmux");
  it.skipIf(tmuxMissing !== null)(
    "cancels a running query on Ctrl-C within 2 s and the session stays usable",
    async () => {
      const agent = await fundedTestAgent(gateway, providerId, FUNDS);
      const env = await psqlEnv(agent);
      const socketName = `pgtoll-test-${process.pid}`;
      const tmux = (...args: string[]) => {
        const run = spawnSync(TMUX, ["-L", socketName, ...args], {
          encoding: "utf8",
          env: { ...process.env, ...env },
        });
        if (run.status !== 0) throw new Error(`tmux ${args.join(" ")} failed: ${run.stderr}`);
        return run.stdout;
      };
      const screen = () => tmux("capture-pane", "-p", "-t", "psql", "-S", "-50");
      // A trailing ";" ends a tmux command, even with -l: escaped, it is typed.
      const typeLine = (text: string) => {
        tmux("send-keys", "-t", "psql", "-l", text.replace(/;$/, "\\;"));
        tmux("send-keys", "-t", "psql", "Enter");
      };
      try {
        tmux("new-session", "-d", "-s", "psql", "-x", "200", "-y", "50", `${PSQL} -X -v VERBOSITY=verbose`);
        // The prompt is <database>=> or, when the provider's role is a superuser (is_superuser passes through), <database>=#.
        await waitFor(
          () => new RegExp(`^${providerId}=[>#]$`, "m").test(screen()),
          10_000,
          "the psql prompt",
        );
        typeLine("SELECT pg_sleep(20);");
        const upstream = new pg.Client({ connectionString: providerDb.url });
        await upstream.connect();
        try {
          await waitFor(
            async () => (await upstream.query(SLEEPING)).rows.length > 0,
            5_000,
            "pg_sleep to run upstream",
          );
          const pressed = Date.now();
          tmux("send-keys", "-t", "psql", "C-c");
          await waitFor(
            () => screen().includes("canceling statement due to user request"),
            2_000,
            "the cancel to reach psql",
          );
          expect(Date.now() - pressed).toBeLessThan(2_000);
          expect(screen()).toContain("ERROR:  57014: canceling statement due to user request");
          await waitFor(
            async () => (await upstream.query(SLEEPING)).rows.length === 0,
            2_000,
            "pg_sleep to stop upstream",
          );
        } finally {
          await upstream.end();
        }
        typeLine("SELECT 6 * 7 AS answer;");
        await waitFor(
          () => /answer\s*\n-+\s*\n\s*42\s*\n\(1 row\)/.test(screen()),
          5_000,
          "the next query's result",
        );
        typeLine("\\q");
        await waitFor(() => proxy.ctx.registry.size === 0, 5_000, "psql to quit");
      } finally {
        spawnSync(TMUX, ["-L", socketName, "kill-server"]);
      }
      await waitForCharges(proxy);
      await expectChargedPerStatement(gateway, agent, providerId, FUNDS, [
        // The cancel's error is the database's text: charged as a row.
        { rows: 1, sql: "SELECT pg_sleep(20)" },
        { rows: 1, sql: "SELECT 6 * 7 AS answer" },
      ]);
    },
  );
});
