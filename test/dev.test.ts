import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { afterAll, describe, expect, it } from "vitest";
import { formatMicro, parseMicro } from "../src/billing/money.js";
import { DEMO_DEPOSIT_MICRO, DEMO_PRICE } from "../src/dev/demo-defaults.js";
import { verifyAgentToken } from "../src/proxy/agent-token.js";
import { neonctlFor } from "./management/neonctl-support.js";
import { type CliProcess, runCli } from "./support/cli.js";
import { expectedCostMicro } from "./support/expected-cost.js";

const root = fileURLToPath(new URL("..", import.meta.url));
/** The demo price in the test's own terms (support/expected-cost.ts): pgtoll's rule is checked, not reused. */
const demoPrices = {
  basePerThousandRowsMicro: BigInt(Math.round(DEMO_PRICE.basePricePer1000Rows * 1e6)),
  markupPpm: BigInt(Math.round(DEMO_PRICE.markupMultiplier * 1e6)),
  minimumMicro: BigInt(Math.round(DEMO_PRICE.minimumCostPerStatement * 1e6)),
  perMBMicro: BigInt(Math.round(DEMO_PRICE.pricePerMB * 1e6)),
};
const cost = (rows: number, bytes: number) => expectedCostMicro(demoPrices, { rows, bytes });
/** DataRow payload bytes of text values: 2, then 4 and the value's bytes per column. */
const rowBytes = (...values: string[]) =>
  values.reduce((sum, value) => sum + 4 + Buffer.byteLength(value), 2);
/** One row of one count, e.g. "5210". */
const countCost = (count: string) => cost(1, rowBytes(count));
const LAST_LINE = /alone sends a transfer and prints its hash/;

/** The environment a person's shell would have: none of the test's own PostgreSQL or pgtoll settings. */
function cleanEnv(): NodeJS.ProcessEnv {
  return Object.fromEntries(
    Object.entries(process.env).filter(([name]) => !/^(PG|DATABASE_URL|LOG_LEVEL)/.test(name)),
  );
}

/** Runs one printed line through `sh -c` from the repository root, as a person pasting it would. */
function sh(line: string, input = ""): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn("sh", ["-c", line], { cwd: root, env: cleanEnv(), stdio: ["pipe", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    const timer = setTimeout(() => child.kill("SIGKILL"), 30_000);
    child.stdout.on("data", (chunk) => (stdout += chunk));
    child.stderr.on("data", (chunk) => (stderr += chunk));
    child.once("error", reject);
    child.once("exit", (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
    child.stdin.end(input);
  });
}

async function json(line: string): Promise<Record<string, unknown>> {
  const result = await sh(line);
  expect(result.stderr).toBe("");
  expect(result.code).toBe(0);
  return JSON.parse(result.stdout) as Record<string, unknown>;
}

/** The walk-through's commands, found by what they start with or call. */
function parse(output: string) {
  const lines = output.split("\n").map((line) => line.trim());
  const find = (test: (line: string) => boolean, what: string) => {
    const line = lines.find(test);
    if (!line) throw new Error(`pgtoll dev printed no ${what} line:\n${output}`);
    return line;
  };
  const psql = find((l) => l.startsWith("PGPASSWORD=pgtoll1."), "psql");
  const curl = (path: string) => find((l) => l.startsWith("curl ") && l.includes(path), path);
  return {
    ready: find((l) => l.startsWith("pgtoll ready "), "ready"),
    psql,
    freshPsql: find((l) => l.startsWith("PGPASSWORD=$("), "fresh-token psql"),
    verifiedPsql: find((l) => l.startsWith("PGSSLROOTCERT="), "verify-full psql"),
    agentToken: find((l) => l.startsWith("PGTOLL_AGENT_KEY=") && l.includes(" agent-token "), "agent-token"),
    payQuery: find((l) => l.startsWith("PGTOLL_AGENT_KEY=") && l.includes(" pay-query "), "pay-query"),
    balance: curl("/api/balance/"),
    query: find((l) => l.startsWith("curl ") && l.includes("/api/query") && !l.includes("maxCost"), "query"),
    maxCost: find((l) => l.startsWith("curl ") && l.includes('"maxCost"'), "maxCost"),
    maxCostCaption: find((l) => l.startsWith("maxCost "), "maxCost caption"),
    dailyLimit: find((l) => l.startsWith("TOKEN=$(") && l.includes("-X PUT"), "daily limit"),
    payQueryCaption: find((l) => l.startsWith("It pays the minimum top-up"), "x402 payment caption"),
    transactions: curl("/api/transactions/"),
    deposit: curl("/api/deposit"),
    catalog: curl("/api/providers?q="),
    providerId: /dbname=([0-9a-f-]{36})/.exec(psql)?.[1] ?? "",
    wallet: /user=(0x[0-9a-f]{40})/.exec(psql)?.[1] ?? "",
    provider: find((l) => l.startsWith("provider "), "provider summary"),
    depositSummary: find((l) => l.startsWith("deposit "), "deposit summary"),
    console: find((l) => /^http:\/\/\S+\/console#provider=/.test(l), "console address"),
    apiKey: /^API key\s+(pgt_\S+)/.exec(find((l) => l.startsWith("API key "), "API key"))?.[1] ?? "",
  };
}

async function balanceOf(line: string): Promise<bigint> {
  const body = await json(line);
  return parseMicro(String(body.balance)) ?? -1n;
}

/** Proxy charges are written just after the session's statements: waits until the balance moves to `expected`. */
async function balanceBecomes(line: string, expected: bigint): Promise<bigint> {
  const deadline = Date.now() + 10_000;
  let balance = await balanceOf(line);
  while (balance !== expected && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 200));
    balance = await balanceOf(line);
  }
  return balance;
}

/**
 * What `neonctl connection-string` prints for a new project of this dev stack, used with psql as the docs say
 * (PGHOSTADDR and PGPORT beside it: the URI names `ep-….localhost` and no port), by TLS server name alone.
 */
async function neonctlConnects(dataDir: string, httpUrl: string, proxyPort: string, rootCert: string) {
  const bootstrap = runCli(["admin", "bootstrap", "--email", "dev@example.com", "--org", "Dev"], {
    PGTOLL_DATA_DIR: dataDir,
    DATABASE_URL: "",
  });
  expect(await bootstrap.exited, bootstrap.stderr()).toBe(0);
  const key = bootstrap.stdout().trim().split("\n").pop()!;
  const configDir = await mkdtemp(join(tmpdir(), "pgtoll-neonctl-"));
  dirs.push(configDir);
  const neonctl = neonctlFor(`${httpUrl}/api/v2`, key, configDir);
  const projectId = (await neonctl.json(["projects", "create", "--name", "tls"])).project.id as string;
  const psql = async (ssl: string, env: Record<string, string> = {}) => {
    const printed = await neonctl.run(["connection-string", "--project-id", projectId, "--ssl", ssl]);
    expect(printed.code, printed.stderr).toBe(0);
    const uri = printed.stdout.trim();
    expect(new URL(uri).hostname).toMatch(/^ep-[a-z0-9-]+\.localhost$/);
    const line = `PGHOSTADDR=127.0.0.1 PGPORT=${proxyPort} psql ${shellWord(uri)} -Atc 'SELECT 1'`;
    return sh(
      Object.entries(env)
        .map(([name, value]) => `${name}=${shellWord(value)} `)
        .join("") + line,
    );
  };
  // neonctl's default: sslmode=require&channel_binding=require.
  expect(await psql("require")).toEqual({ code: 0, stdout: "1\n", stderr: "" });
  // The endpoint's name checked against the dev certificate's wildcard.
  expect(await psql("verify-full", { PGSSLROOTCERT: rootCert })).toEqual({
    code: 0,
    stdout: "1\n",
    stderr: "",
  });
}

const shellWord = (value: string) => `'${value.replaceAll("'", `'"'"'`)}'`;

async function stopped(cli: CliProcess, signal: NodeJS.Signals): Promise<number | null> {
  cli.child.kill(signal);
  return cli.exited;
}

const dirs: string[] = [];
const running: CliProcess[] = [];
afterAll(async () => {
  for (const cli of running) cli.child.kill("SIGKILL");
  for (const dir of dirs) await rm(dir, { recursive: true, force: true });
});

describe("pgtoll dev", () => {
  it("prints psql, agent-token and curl commands that work as printed, and restarts on the same data directory", async () => {
    const dataDir = await mkdtemp(join(tmpdir(), "pgtoll-dev-"));
    dirs.push(dataDir);
    const env = {
      PGTOLL_DATA_DIR: dataDir,
      PGTOLL_HTTP_PORT: "0",
      PGTOLL_PROXY_PORT: "0",
      DATABASE_URL: "",
      LOG_LEVEL: "",
    };

    const first = runCli(["dev"], env);
    running.push(first);
    await first.waitFor(LAST_LINE, 120_000);
    const run = parse(first.stdout());
    expect(run.ready).toMatch(/^pgtoll ready http:\/\/127\.0\.0\.1:\d+ postgres:\/\/127\.0\.0\.1:\d+$/);
    expect(run.provider).toContain("registered now");
    expect(existsSync(join(dataDir, "dev-stack.json"))).toBe(true);

    // The demo deposit is on the books.
    const funded = await balanceOf(run.balance);
    expect(funded).toBe(DEMO_DEPOSIT_MICRO);

    // psql through the wire proxy gets real rows, and the balance falls by exactly the cost rule.
    const psql = await sh(
      run.psql,
      "SELECT iata_code, name FROM airports WHERE iata_code IN ('AKL', 'WLG', 'ZQN') ORDER BY iata_code;\n",
    );
    expect(psql.stderr).toBe("");
    expect(psql.code).toBe(0);
    expect(psql.stdout).toMatch(/AKL\s+\|\s+Auckland International Airport/);
    expect(psql.stdout).toMatch(/WLG\s+\|\s+Wellington International Airport/);
    expect(psql.stdout).toMatch(/ZQN\s+\|\s+Queenstown International Airport/);
    expect(psql.stdout).toContain("(3 rows)");
    const psqlBytes = [...psql.stdout.matchAll(/^\s*([A-Z]{3})\s+\|\s+(.+?)\s*$/gm)].reduce(
      (sum, [, iata, name]) => sum + rowBytes(iata!, name!),
      0,
    );
    const psqlCost = cost(3, psqlBytes);
    const afterPsql = funded - psqlCost;
    expect(await balanceBecomes(run.balance, afterPsql)).toBe(afterPsql);

    // REST query, charged by the same rule.
    const query = await json(run.query);
    expect(query.rowCount).toBe(5);
    expect((query.rows as { iata_code: string }[])[0]?.iata_code).toBe("DCY");
    const queryCost = cost(5, (query.costBreakdown as { bytes: number }).bytes);
    expect(query.actualCost).toBe(formatMicro(queryCost));
    const afterQuery = afterPsql - queryCost;
    expect(await balanceOf(run.balance)).toBe(afterQuery);

    // The printed catalog search finds the sample provider, listed with its tables, and costs nothing.
    const listed = (await json(run.catalog)).providers as { id: string; tables: { names: string[] } }[];
    expect(listed.map((p) => p.id)).toEqual([run.providerId]);
    expect(listed[0]?.tables.names).toEqual(["airports", "countries", "regions"]);
    expect(await balanceOf(run.balance)).toBe(afterQuery);

    // A fresh token from the printed agent-token command, and the one-go psql line that uses it.
    const token = await sh(run.agentToken);
    expect(token.stderr).toBe("");
    expect(token.stdout).toMatch(/^pgtoll1\.\d+\.0x[0-9a-f]{40}\.0x[0-9a-f]{130}\n$/);
    expect(await verifyAgentToken(token.stdout.trim(), run.wallet, run.providerId)).toEqual({ ok: true });
    const fresh = await sh(run.freshPsql, "SELECT count(*) FROM airports;\n");
    expect(fresh.stderr).toBe("");
    expect(fresh.stdout).toMatch(/^\s+5210$/m);
    const afterFresh = afterQuery - countCost("5210");
    expect(await balanceBecomes(run.balance, afterFresh)).toBe(afterFresh);

    // A new on-chain transfer, made by the printed dev-transfer command, credited by the printed deposit line.
    const deposit = await json(run.deposit);
    expect(deposit.success).toBe(true);
    expect(deposit.transaction).toMatchObject({ amount: "5.000000", verified: true });
    const afterDeposit = afterFresh + 5_000_000n;
    expect(deposit.balance).toBe(formatMicro(afterDeposit));

    // The printed x402 line: a wallet with no balance pays for its query in the same exchange.
    const paid = (await json(run.payQuery)) as {
      status: number;
      paid: string;
      balance: string;
      paymentResponse: { success: boolean; transaction: string; network: string };
      body: { rowCount: number; actualCost: string; costBreakdown: { bytes: number } };
    };
    expect(paid.status).toBe(200);
    expect(paid.paymentResponse).toMatchObject({ success: true, network: "eip155:8453" });
    expect(paid.body.rowCount).toBeGreaterThan(0);
    expect(paid.body.actualCost).toBe(formatMicro(cost(paid.body.rowCount, paid.body.costBreakdown.bytes)));
    // As its caption says: it paid the minimum top-up, and what the query did not spend is its balance.
    expect(run.payQueryCaption).toContain("1.000000 USDC");
    expect(paid.paid).toBe("1.000000");
    expect(paid.balance).toBe(formatMicro(1_000_000n - (parseMicro(paid.body.actualCost) ?? 0n)));

    // The ledger lists all of it, newest first.
    const ledger = (await json(run.transactions)).transactions as {
      type: string;
      amount: string;
      txHash: string | null;
    }[];
    expect(ledger.map((e) => [e.type, e.amount])).toEqual([
      ["deposit", "5.000000"],
      ["query", formatMicro(-countCost("5210"))],
      ["query", formatMicro(-queryCost)],
      ["query", formatMicro(-psqlCost)],
      ["deposit", formatMicro(DEMO_DEPOSIT_MICRO)],
    ]);
    expect(run.depositSummary).toContain(ledger[4]?.txHash ?? "missing");

    // The printed console address and key: the demo agent's queries are the provider's figures there.
    const consoleUrl = new URL(run.console);
    expect(consoleUrl.hash).toBe(`#provider=${run.providerId}`);
    expect((await fetch(consoleUrl)).status).toBe(200);
    const analytics = (path: string, apiKey = run.apiKey) =>
      fetch(`${consoleUrl.origin}/api/providers/${run.providerId}/${path}`, {
        headers: { "x-api-key": apiKey },
      });
    const agents = (await (await analytics("agents")).json()) as {
      agents: { wallet: string; spent: string }[];
    };
    expect(agents.agents.map((a) => [a.wallet.toLowerCase(), a.spent])).toContainEqual([
      run.wallet,
      formatMicro(psqlCost + queryCost + countCost("5210")),
    ]);
    const shapes = (await (await analytics("statements")).json()) as { statements: { normalized: string }[] };
    expect(shapes.statements.map((shape) => shape.normalized)).toContain(
      "SELECT iata_code, name FROM airports WHERE iata_code IN ($1, $2, $3) ORDER BY iata_code",
    );

    // The printed mcpServers block, started as an agent host would start it (from another directory).
    const output = first.stdout();
    const blockStart = output.indexOf('{\n    "mcpServers"');
    const printed = JSON.parse(output.slice(blockStart, output.indexOf("\n\n", blockStart))) as {
      mcpServers: { pgtoll: { command: string; args: string[]; env: Record<string, string> } };
    };
    const { command, args, env: mcpEnv } = printed.mcpServers.pgtoll;
    const host = new Client({ name: "dev-test-host", version: "1" });
    await host.connect(
      new StdioClientTransport({
        command,
        args,
        env: { PATH: process.env.PATH ?? "", ...mcpEnv },
        cwd: tmpdir(),
        stderr: "pipe",
      }),
    );
    try {
      const balance = (await host.callTool({ name: "balance", arguments: {} })).structuredContent as {
        balance: string;
      };
      expect(balance.balance).toBe(formatMicro(afterDeposit));
      const tools = (await host.listTools()).tools.map((tool) => tool.name);
      expect(tools).toContain("deposit");
      const count = (
        await host.callTool({ name: "query", arguments: { sql: "SELECT count(*) AS n FROM airports" } })
      ).structuredContent as { rows: { n: string }[]; cost: string };
      expect(count.rows).toEqual([{ n: "5210" }]);
      expect(count.cost).toBe(formatMicro(countCost("5210")));
    } finally {
      await host.close();
    }
    // The printed maxCost example does what its caption says: estimated within the budget, cut at it.
    expect(run.maxCostCaption).toContain("truncated: true");
    const budgeted = (await json(run.maxCost)) as {
      rowCount: number;
      truncated: boolean;
      estimatedCost: string;
      actualCost: string;
      costBreakdown: { bytes: number };
    };
    expect(budgeted.truncated).toBe(true);
    expect(parseMicro(budgeted.estimatedCost)!).toBeLessThanOrEqual(20_000n);
    expect(parseMicro(budgeted.actualCost)!).toBeLessThanOrEqual(20_000n);
    expect(budgeted.rowCount).toBeGreaterThan(0);
    expect(budgeted.rowCount).toBeLessThan(873);
    expect(budgeted.actualCost).toBe(formatMicro(cost(budgeted.rowCount, budgeted.costBreakdown.bytes)));
    // The daily-limit line is one shell line (its -w '\n' escaped) and sets the limit.
    const limit = await json(run.dailyLimit);
    expect(limit).toMatchObject({ dailyLimit: "1.000000", spentToday: expect.any(String) });

    // The proxy offers TLS with the certificate pgtoll dev made; the printed verify-full line trusts it.
    const rootCert = /^PGSSLROOTCERT=(\S+) /.exec(run.verifiedPsql)?.[1] ?? "";
    expect(rootCert).toBe(join(dataDir, "tls", "dev-proxy.crt"));
    const verified = await sh(run.verifiedPsql, "SELECT count(*) FROM regions;\n");
    expect(verified.stderr).toBe("");
    expect(verified.stdout).toMatch(/^\s+3901$/m);
    const certificate = await readFile(rootCert, "utf8");
    await neonctlConnects(dataDir, consoleUrl.origin, new URL(run.ready.split(" ")[3]!).port, rootCert);
    const afterMcp =
      afterDeposit - countCost("5210") - (parseMicro(budgeted.actualCost) ?? 0n) - countCost("3901");

    expect(await stopped(first, "SIGTERM")).toBe(0);
    for (const file of ["dev-stack.json", "pgtoll.pid", "postgres/postmaster.pid"]) {
      expect(existsSync(join(dataDir, file))).toBe(false);
    }

    // Again on the same data directory: same provider, balance kept, a new deposit on the new chain.
    const second = runCli(["dev"], env);
    running.push(second);
    await second.waitFor(LAST_LINE, 120_000);
    const rerun = parse(second.stdout());
    expect(rerun.providerId).toBe(run.providerId);
    expect(rerun.provider).toContain("registered by an earlier run, reused");
    // The certificate of the first run is reused.
    expect(second.stdout()).toContain(`reused: ${rootCert}`);
    expect(await readFile(rootCert, "utf8")).toBe(certificate);
    // A new key each run: the console signs in with the one printed now, not the last run's.
    const summaryWith = (apiKey: string) =>
      fetch(`${new URL(rerun.console).origin}/api/providers/${rerun.providerId}/summary`, {
        headers: { "x-api-key": apiKey },
      });
    expect(rerun.apiKey).not.toBe(run.apiKey);
    expect((await summaryWith(rerun.apiKey)).status).toBe(200);
    expect((await summaryWith(run.apiKey)).status).toBe(401);
    expect(await balanceOf(rerun.balance)).toBe(afterMcp + DEMO_DEPOSIT_MICRO);
    const again = await sh(rerun.psql, "SELECT count(*) FROM countries;\n");
    expect(again.stderr).toBe("");
    expect(again.stdout).toMatch(/^\s+248$/m);
    expect(await stopped(second, "SIGINT")).toBe(0);
  }, 240_000);
});
