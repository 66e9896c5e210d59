import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { expect } from "vitest";
import { costOfRows, type Price } from "../../src/billing/cost.js";
import { getBalance, listLedgerEntries } from "../../src/billing/ledger.js";
import type { TestGateway } from "./gateway.js";
import type { TestProxy } from "./proxy.js";

/**
 * The price the real-client tests register: 0.001 USDC per 1000 rows x 1.5, i.e. 1.5 micro-USDC a row, so
 * that rounding up happens per statement (3 rows cost 5, not 4.5) and a wrong grouping of rows shows.
 */
export const ODD_PRICING = { basePricePer1000Rows: 0.001, markupMultiplier: 1.5 };
export const ODD_PRICE: Price = { priceMicroPer1000Rows: 1_000n, markupPpm: 1_500_000n };

export interface ProcessResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/** Runs a program to completion (killing it after `timeoutMs`), feeding `input` on its standard input. */
export function runProcess(
  command: string,
  args: string[],
  options: { env?: Record<string, string>; input?: string; timeoutMs?: number } = {},
): Promise<ProcessResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, {
      env: { ...process.env, ...options.env },
      stdio: ["pipe", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk));
    const timer = setTimeout(() => child.kill("SIGKILL"), options.timeoutMs ?? 20_000);
    child.once("error", (error) => {
      clearTimeout(timer);
      reject(error);
    });
    child.once("close", (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr });
    });
    child.stdin.on("error", () => {});
    child.stdin.end(options.input ?? "");
  });
}

/** The reason a file of tests cannot run when `path` is not installed, or null when it is. */
export function missingTool(path: string, installHint: string): string | null {
  return existsSync(path) ? null : `${path} is not installed (${installHint}; .ci/run installs it)`;
}

/** Polls `condition` every 20 ms until it holds, failing after `timeoutMs`. */
export async function waitFor(
  condition: () => boolean | Promise<boolean>,
  timeoutMs = 5_000,
  what = "condition",
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/**
 * Charges are group-committed and reservations given back when a session ends: once every client session of
 * `proxy` has ended, this waits for both, so balance and ledger are final.
 */
export async function settleCharges(proxy: TestProxy): Promise<void> {
  await waitFor(() => proxy.ctx.registry.size === 0, 5_000, "the proxy's sessions to end");
  await Promise.all(proxy.ctx.releases);
  await proxy.ctx.chargeWriter.flush();
}

/**
 * Checks that the agent was charged exactly the cost rule per statement: one `query` ledger entry per statement
 * that returned or wrote rows (`rowCounts`, oldest first, with the statement's SQL when given), each for
 * `costOfRows` of its rows, chained balances, nothing left reserved, and the balance fallen by their sum.
 * Returns the query entries, oldest first.
 */
export async function expectChargedPerStatement(
  gateway: TestGateway,
  agent: { wallet: string },
  providerId: string,
  funded: bigint,
  statements: { rows: number; sql?: string | RegExp }[],
  price: Price = ODD_PRICE,
) {
  const entries = (
    await listLedgerEntries(gateway.ctx.db, agent.wallet, { providerId, limit: 1000 })
  ).reverse();
  const charged = statements.filter((s) => costOfRows(s.rows, price) > 0n);
  const queries = entries.filter((e) => e.type === "query");
  expect(queries.map((e) => e.metadata.rowCount)).toEqual(charged.map((s) => s.rows));
  for (const [i, statement] of charged.entries()) {
    const entry = queries[i]!;
    expect(entry.amountMicro).toBe(-costOfRows(statement.rows, price));
    if (typeof statement.sql === "string") expect(entry.metadata.sql).toBe(statement.sql);
    else if (statement.sql) expect(entry.metadata.sql).toMatch(statement.sql);
  }
  for (let i = 1; i < entries.length; i++)
    expect(entries[i]!.balanceBeforeMicro).toBe(entries[i - 1]!.balanceAfterMicro);
  const total = charged.reduce((sum, s) => sum + costOfRows(s.rows, price), 0n);
  const balance = await getBalance(gateway.ctx.db, agent.wallet, providerId);
  expect(balance).toMatchObject({ balanceMicro: funded - total, reservedMicro: 0n });
  return queries;
}
