import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { formatMicro, parseMicro } from "../src/billing/money.js";
import { type CliProcess, runCli } from "./support/cli.js";
import { expectedCostMicro } from "./support/expected-cost.js";

const root = fileURLToPath(new URL("..", import.meta.url));
/** The price the walk-through sets, in the test's own terms: 0.5 USDC per 1000 rows, markup 1.2. */
/** `node dist/cli.js` as the docs print it, but from the sources (support/cli.ts does the same): no stale build. */
const CLI = "node --import tsx src/cli.ts";
const walkThroughPrice = { basePerThousandRowsMicro: 500_000n, markupPpm: 1_200_000n };

/** The first `sh` block after the heading `## heading` of the docs page `page`, as printed. */
function docBlock(page: string, heading: string): string {
  const text = readFileSync(join(root, "docs", page), "utf8");
  const section = text.slice(text.indexOf(`\n## ${heading}\n`));
  const block = /```sh\n([\s\S]*?)```/.exec(section)?.[1];
  if (!block) throw new Error(`docs/${page} has no sh block under "## ${heading}"`);
  return block;
}

/** The environment a person's shell would have: none of the test's own PostgreSQL or pgtoll settings. */
function cleanEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  return {
    ...Object.fromEntries(
      Object.entries(process.env).filter(([name]) => !/^(PG|DATABASE_URL|LOG_LEVEL)/.test(name)),
    ),
    ...extra,
  };
}

/** Runs `script` with `sh -e` from the repository root, as a person pasting it would (stopping at a failure). */
function sh(
  script: string,
  env: Record<string, string>,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn("sh", ["-ec", script], { cwd: root, env: cleanEnv(env), stdio: "pipe" });
    let stdout = "";
    let stderr = "";
    const timer = setTimeout(() => child.kill("SIGKILL"), 120_000);
    child.stdout.on("data", (chunk) => (stdout += chunk));
    child.stderr.on("data", (chunk) => (stderr += chunk));
    child.once("error", reject);
    child.once("exit", (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
    child.stdin.end();
  });
}

interface LedgerEntry {
  type: string;
  amount: string;
  txHash: string | null;
  metadata: { source?: string };
}

const dirs: string[] = [];
let dev: CliProcess | undefined;
let dataDir = "";
let httpUrl = "";
let proxyPort = "";

beforeAll(async () => {
  dataDir = await mkdtemp(join(tmpdir(), "pgtoll-first-hour-"));
  dirs.push(dataDir);
  dev = runCli(["dev"], {
    PGTOLL_DATA_DIR: dataDir,
    PGTOLL_HTTP_PORT: "0",
    PGTOLL_PROXY_PORT: "0",
    DATABASE_URL: "",
    LOG_LEVEL: "",
  });
  const ready = await dev.waitFor(/^pgtoll ready /, 120_000);
  const [, http, proxy] = /^pgtoll ready (\S+) (\S+)$/.exec(ready) ?? [];
  httpUrl = new URL(http!).origin;
  proxyPort = new URL(proxy!).port;
  await dev.waitFor(/alone sends a transfer and prints its hash/, 30_000);
}, 180_000);

afterAll(async () => {
  if (dev) {
    dev.child.kill("SIGTERM");
    await dev.exited;
  }
  for (const dir of dirs) await rm(dir, { recursive: true, force: true });
});

describe("a provider's first hour on pgtoll dev, from docs/dev-stack.md", () => {
  it("runs the documented walk-through as printed: own database, registration, prices, funded agent, paid queries", async () => {
    const printed = docBlock("dev-stack.md", "Your own provider and agent");
    expect(printed).toContain("API=http://127.0.0.1:3000");
    expect(printed).toContain("port=6543");
    // Only the ports differ from the docs' (the test's stack takes free ones); the values it made are echoed after.
    const script = `${printed
      .replaceAll("node dist/cli.js", CLI)
      .replace("API=http://127.0.0.1:3000", `API=${httpUrl}`)
      .replace("port=6543", `port=${proxyPort}`)}
printf 'VALUES %s %s %s %s\\n' "$PROVIDER" "$AGENT" "$TX" "$DB_URL"
`;
    const run = await sh(script, { PGTOLL_DATA_DIR: dataDir });
    expect(run.stderr).toBe("");
    expect(run.code).toBe(0);
    const [, providerId, agent, tx, dbUrl] = /^VALUES (\S+) (\S+) (\S+) (\S+)$/m.exec(run.stdout) ?? [];
    expect(providerId).toMatch(/^[0-9a-f-]{36}$/);
    expect(agent).toMatch(/^0x[0-9a-f]{40}$/);
    expect(tx).toMatch(/^0x[0-9a-f]{64}$/);

    // As the docs say it answers: registered, deposited, 6 rows over REST, 8 counted by psql.
    expect(run.stdout).toMatch(/"apiKey":"pgt_/);
    expect(run.stdout).toContain('{"success":true,"balance":"5.000000"');
    const restAnswer = JSON.parse(run.stdout.split("\n").find((l) => l.startsWith('{"rows":'))!) as {
      rowCount: number;
      actualCost: string;
    };
    const restCost = expectedCostMicro(walkThroughPrice, { rows: 6 });
    expect(restAnswer.rowCount).toBe(6);
    expect(restAnswer.actualCost).toBe(formatMicro(restCost));
    expect(restAnswer.actualCost).toBe("0.003600");
    expect(run.stdout).toMatch(/^\s+8$/m);

    // The ledger, read apart from the script: the deposit proven by the agent's own transfer, then both queries.
    const psqlCost = expectedCostMicro(walkThroughPrice, { rows: 1 });
    const ledgerUrl = `${httpUrl}/api/transactions/${agent}?providerId=${providerId}&limit=10`;
    let ledger: LedgerEntry[] = [];
    const deadline = Date.now() + 10_000;
    // The proxy writes its charge once the session's charge window closes, just after psql ends.
    while (ledger.length < 3 && Date.now() < deadline) {
      ledger = ((await (await fetch(ledgerUrl)).json()) as { transactions: LedgerEntry[] }).transactions;
      if (ledger.length < 3) await new Promise((r) => setTimeout(r, 200));
    }
    expect(ledger.map((e) => [e.type, e.amount, e.metadata.source ?? null])).toEqual([
      ["query", formatMicro(-psqlCost), "proxy"],
      ["query", formatMicro(-restCost), "rest"],
      ["deposit", "5.000000", null],
    ]);
    expect(ledger[2]?.txHash).toBe(tx);
    const balance = (await (await fetch(`${httpUrl}/api/balance/${agent}/${providerId}`)).json()) as {
      balance: string;
    };
    expect(parseMicro(balance.balance)).toBe(5_000_000n - restCost - psqlCost);

    // The role the docs register is the unprivileged one security.md describes: it reads products, nothing more.
    const role = new pg.Client({ connectionString: dbUrl });
    await role.connect();
    try {
      const rights = await role.query(
        "SELECT rolsuper, rolcreatedb, rolcreaterole, rolreplication, rolbypassrls FROM pg_roles WHERE rolname = current_user",
      );
      expect(rights.rows).toEqual([
        {
          rolsuper: false,
          rolcreatedb: false,
          rolcreaterole: false,
          rolreplication: false,
          rolbypassrls: false,
        },
      ]);
      await expect(role.query("INSERT INTO products VALUES (99, 'x', 1, true)")).rejects.toMatchObject({
        code: "42501",
      });
      await expect(role.query("CREATE TABLE mine (id int)")).rejects.toMatchObject({ code: "42501" });
      await expect(role.query("SELECT count(*)::int AS n FROM products")).resolves.toMatchObject({
        rows: [{ n: 8 }],
      });
    } finally {
      await role.end();
    }
  }, 180_000);

  it("runs docs/payment-gateway.md's walk-through as printed, with the figures its comments show", async () => {
    const printed = docBlock("payment-gateway.md", "Walk-through (curl)");
    expect(printed).toContain("API=http://127.0.0.1:3000");
    const script = `${printed.replaceAll("node dist/cli.js", CLI).replace("API=http://127.0.0.1:3000", `API=${httpUrl}`)}
printf '\\nVALUES %s %s\\n' "$PROVIDER" "$AGENT"
`;
    const run = await sh(script, { PGTOLL_DATA_DIR: dataDir });
    expect(run.stderr).toBe("");
    expect(run.code).toBe(0);
    const [, providerId, agent] = /^VALUES (\S+) (\S+)$/m.exec(run.stdout) ?? [];
    expect(run.stdout).toContain('"email":"data@acme.example"');
    expect(run.stdout).toContain('{"success":true,"balance":"25.000000"');
    expect(run.stdout).toMatch(/"rowCount":3,"estimatedCost":"0\.001800","actualCost":"0\.001800"/);
    expect(formatMicro(expectedCostMicro(walkThroughPrice, { rows: 3 }))).toBe("0.001800");
    const balance = (await (await fetch(`${httpUrl}/api/balance/${agent}/${providerId}`)).json()) as {
      balance: string;
    };
    expect(balance.balance).toBe("24.998200");
    expect(run.stdout).toContain('"balance":"24.998200","available":"24.998200"');
    expect(run.stdout).toContain('{"status":"healthy"');
  }, 120_000);

  it("refuses a database name that is taken, and a provider id nobody registered, with a clear message", async () => {
    const env = { PGTOLL_DATA_DIR: dataDir };
    const taken = await sh(`${CLI} dev-provider-db --name pgtoll_sample`, env);
    expect(taken.code).toBe(1);
    expect(taken.stderr).toContain("pgtoll_sample");
    expect(taken.stdout).toBe("");
    const hostile = await sh(`${CLI} dev-provider-db --name 'x"; DROP DATABASE postgres; --'`, env);
    expect(hostile.code).toBe(1);
    expect(hostile.stderr).toContain("cannot be a provider database");
    const unknown = await sh(
      `${CLI} dev-transfer --amount 1 --provider 00000000-0000-4000-8000-000000000000`,
      env,
    );
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain("no provider 00000000-0000-4000-8000-000000000000 is registered");
    expect(unknown.stdout).toBe("");
  });

  it("says that no pgtoll dev is running on a data directory without one", async () => {
    const empty = await mkdtemp(join(tmpdir(), "pgtoll-no-dev-"));
    dirs.push(empty);
    for (const command of [
      "dev-provider-db",
      "dev-wallet --usdc 1",
      "dev-transfer --amount 1 --to 0x0000000000000000000000000000000000000001",
    ]) {
      const result = await sh(`${CLI} ${command}`, { PGTOLL_DATA_DIR: empty });
      expect(result.code, command).toBe(1);
      expect(result.stderr).toContain(`no pgtoll dev is running on the data directory ${empty}`);
      expect(result.stdout).toBe("");
    }
  });
});
