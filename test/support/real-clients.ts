import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { expect } from "vitest";
import { costOfRows, type Price, priceOf } from "../../src/billing/cost.js";
import { getBalance, type LedgerEntry, listLedgerEntries } from "../../src/billing/ledger.js";
import { parseMicro } from "../../src/billing/money.js";
import { loadGuard } from "../../src/guard/index.js";
import { StatementShapes } from "../../src/guard/statement-shape.js";
import type { TestGateway } from "./gateway.js";
import type { TestProxy } from "./proxy.js";

/**
 * The price the real-client tests register: 0.001 USDC per 1000 rows x 1.5, i.e. 1.5 micro-USDC a row, so
 * that rounding up happens per statement (3 rows cost 5, not 4.5) and a wrong grouping of rows shows.
 */
export const ODD_PRICING = { basePricePer1000Rows: 0.001, markupMultiplier: 1.5 };
export const ODD_PRICE: Price = priceOf({ priceMicroPer1000Rows: 1_000n, markupPpm: 1_500_000n });

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
export async function waitForCharges(proxy: TestProxy): Promise<void> {
  await waitFor(() => proxy.ctx.registry.size === 0, 5_000, "the proxy's sessions to end");
  await Promise.all(proxy.ctx.releases);
  await proxy.ctx.chargeWriter.flush();
}

/**
 * Checks that the agent was charged exactly the cost rule per statement: the proxy writes one `query` entry per
 * charge window, whose amount is the sum of its statements' costs, each rounded up on its own; so the
 * entries together must sum to `costOfRows` of each statement that returned or wrote rows (`statements`), row
 * counts included, and the per-shape breakdown must show each statement given with its SQL text. Balances are
 * chained, nothing is left reserved, and the balance fell by the sum. Returns the query entries, oldest first.
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
  const total = charged.reduce((sum, s) => sum + costOfRows(s.rows, price), 0n);
  expect(queries.reduce((sum, e) => sum - e.amountMicro, 0n)).toBe(total);
  expect(queries.reduce((sum, e) => sum + Number(e.metadata.rowCount), 0)).toBe(
    charged.reduce((sum, s) => sum + s.rows, 0),
  );
  for (const entry of queries) expect(entry.metadata.source).toBe("proxy");
  await expectShapesCharged(queries, charged, price);
  for (let i = 1; i < entries.length; i++)
    expect(entries[i]!.balanceBeforeMicro).toBe(entries[i - 1]!.balanceAfterMicro);
  const balance = await getBalance(gateway.ctx.db, agent.wallet, providerId);
  expect(balance).toMatchObject({ balanceMicro: funded - total, reservedMicro: 0n });
  return queries;
}

interface ShapeLine {
  fingerprint: string;
  sample: string;
  calls: number;
  rows: number;
  cost: string;
}

/** The per-shape lines of the proxy's window entries, summed over the entries by fingerprint. */
export function shapesCharged(
  entries: readonly LedgerEntry[],
): Map<string, { rows: number; costMicro: bigint; calls: number; sample: string }> {
  const byShape = new Map<string, { rows: number; costMicro: bigint; calls: number; sample: string }>();
  for (const entry of entries) {
    for (const line of (entry.metadata.shapes ?? []) as ShapeLine[]) {
      const known = byShape.get(line.fingerprint) ?? {
        rows: 0,
        costMicro: 0n,
        calls: 0,
        sample: line.sample,
      };
      known.rows += line.rows;
      known.calls += line.calls;
      known.costMicro += parseMicro(line.cost) ?? 0n;
      byShape.set(line.fingerprint, known);
    }
  }
  return byShape;
}

/**
 * Each statement given with its text is in the breakdown: its shape's rows and cost are at least those of the
 * statements given with texts of that shape (exactly them when every statement was given with its text).
 */
async function expectShapesCharged(
  entries: readonly LedgerEntry[],
  charged: readonly { rows: number; sql?: string | RegExp }[],
  price: Price,
): Promise<void> {
  await loadGuard();
  const shapes = new StatementShapes();
  const byShape = shapesCharged(entries);
  const expected = new Map<string, { rows: number; costMicro: bigint }>();
  for (const statement of charged) {
    if (typeof statement.sql !== "string") continue;
    const fingerprint = shapes.fingerprint(statement.sql);
    const sum = expected.get(fingerprint) ?? { rows: 0, costMicro: 0n };
    sum.rows += statement.rows;
    sum.costMicro += costOfRows(statement.rows, price);
    expected.set(fingerprint, sum);
  }
  const exact = charged.every((statement) => typeof statement.sql === "string");
  for (const [fingerprint, sum] of expected) {
    const line = byShape.get(fingerprint);
    expect(line, `a breakdown line for ${fingerprint}`).toBeDefined();
    if (exact) expect({ rows: line!.rows, costMicro: line!.costMicro }).toEqual(sum);
    else {
      expect(line!.rows).toBeGreaterThanOrEqual(sum.rows);
      expect(line!.costMicro >= sum.costMicro).toBe(true);
    }
  }
}
