import { performance } from "node:perf_hooks";
import type pg from "pg";
import Cursor from "pg-cursor";
import { costOfRows, type Price } from "../billing/cost.js";
import {
  growReservation,
  type LedgerEntry,
  type Queryable,
  type Reservation,
  reserveFunds,
  settleReservation,
  voidReservation,
} from "../billing/ledger.js";
import { checkSql, type GuardedStatement, type GuardPolicy } from "../guard/index.js";
import { sendCancelRequest } from "../providers/cancel-request.js";
import { QueryError, upstreamQueryError } from "./query-errors.js";

export interface MeteredQueryRequest {
  agentWallet: string;
  providerId: string;
  sql: string;
  params?: unknown[];
  price: Price;
}

export interface MeteredQueryResult {
  rows: Record<string, unknown>[];
  rowCount: number;
  estimatedCostMicro: bigint;
  actualCostMicro: bigint;
  executionMs: number;
  ledgerEntry: LedgerEntry | null;
  statements: { command: string; rowCount: number }[];
}

export interface MeteredQueryDeps {
  ledger: Queryable;
  upstream: pg.Pool;
  policy?: GuardPolicy;
  rowCap: number;
  statementTimeoutMs: number;
  reservationTtlSeconds: number;
}

/** Commands after which the pooled session must be reset before another agent uses it. */
const SESSION_STATE_COMMANDS = new Set(["SET", "RESET", "PREPARE", "DECLARE CURSOR", "DECLARE", "LISTEN"]);

/**
 * Runs SQL for an agent on a provider's database, metered: guard, planner estimate, reservation, execution
 * in one upstream transaction, then the charge. The agent is never charged more than its available balance and
 * receives no row it has not paid for: when the actual cost outgrows what it can pay, the transaction is
 * rolled back and nothing is charged (402). A result above `rowCap` rows is refused uncharged before it is
 * held in memory. Transaction control statements (BEGIN/COMMIT) are acknowledged, not forwarded: each request
 * is one transaction, committed only once paid for.
 */
export async function runMeteredQuery(
  deps: MeteredQueryDeps,
  request: MeteredQueryRequest,
): Promise<MeteredQueryResult> {
  const verdict = checkSql(request.sql, deps.policy);
  if (verdict.kind === "invalid") throw new QueryError(400, `invalid SQL: ${verdict.message}`);
  if (verdict.kind === "deny")
    throw new QueryError(403, `SQL not allowed (${verdict.rule}): ${verdict.message}`);
  const statements = verdict.statements;
  if (request.params && request.params.length > 0 && statements.length !== 1) {
    throw new QueryError(400, "params can only be used with a single statement");
  }
  const paid = request.price.priceMicroPer1000Rows > 0n;

  let client: pg.PoolClient;
  try {
    client = await deps.upstream.connect();
  } catch (error) {
    throw new QueryError(
      500,
      `query execution failed: the provider's database is unreachable: ${(error as Error).message}`,
    );
  }
  const started = performance.now();
  let reservation: Reservation | null = null;
  let clientBroken: Error | undefined;
  try {
    const estimatedRows = await estimateRows(client, statements, request.params);
    const estimatedCostMicro = costOfRows(estimatedRows, request.price);
    if (paid) {
      reservation = await reserveFunds(deps.ledger, {
        agentWallet: request.agentWallet,
        providerId: request.providerId,
        minMicro: 1n,
        maxMicro: estimatedCostMicro > 0n ? estimatedCostMicro : 1n,
        ttlSeconds: deps.reservationTtlSeconds,
      });
      if (!reservation)
        throw new QueryError(402, "insufficient balance: deposit funds with this provider first");
    }

    const outcome = await executeInTransaction(client, deps, statements, request.params).catch(
      (error: unknown) => {
        if ((error as { brokenClient?: boolean }).brokenClient) clientBroken = error as Error;
        throw error;
      },
    );
    const actualCostMicro = costOfRows(outcome.rowCount, request.price);
    if (reservation && !(await growReservation(deps.ledger, reservation, actualCostMicro))) {
      await client.query("ROLLBACK");
      throw new QueryError(
        402,
        `insufficient balance: this result of ${outcome.rowCount} rows costs more than the available balance; nothing was charged`,
      );
    }
    await client.query("COMMIT");
    if (outcome.changedSession) await client.query("DISCARD ALL");
    let ledgerEntry: LedgerEntry | null = null;
    if (reservation) {
      ledgerEntry = await settleReservation(deps.ledger, reservation, actualCostMicro, {
        sql: request.sql,
        rowCount: outcome.rowCount,
        source: "rest",
      });
      reservation = null;
    }
    return {
      rows: outcome.rows,
      rowCount: outcome.rowCount,
      estimatedCostMicro,
      actualCostMicro,
      executionMs: performance.now() - started,
      ledgerEntry,
      statements: outcome.statements,
    };
  } catch (error) {
    if (!clientBroken) await client.query("ROLLBACK").catch((e: Error) => (clientBroken = e));
    throw error instanceof QueryError ? error : upstreamQueryError(error, deps.statementTimeoutMs);
  } finally {
    if (reservation) await voidReservation(deps.ledger, reservation).catch(() => {});
    client.release(clientBroken);
  }
}

/** Sum of the planner's row estimates; statements it cannot plan (yet) count 0. */
async function estimateRows(
  client: pg.PoolClient,
  statements: GuardedStatement[],
  params?: unknown[],
): Promise<number> {
  let total = 0;
  for (const statement of statements) {
    if (!statement.explainable) continue;
    try {
      const { rows } = await client.query<{ "QUERY PLAN": PlanJson[] }>(
        `EXPLAIN (FORMAT JSON) ${statement.sql}`,
        params,
      );
      total += planRows(rows[0]?.["QUERY PLAN"]?.[0]?.Plan);
    } catch {
      // The statement's own execution reports the real error.
    }
  }
  return total;
}

interface PlanNode {
  "Node Type"?: string;
  "Plan Rows"?: number;
  Plans?: PlanNode[];
}
interface PlanJson {
  Plan?: PlanNode;
}

/** A ModifyTable node reports 0 rows without RETURNING; what it writes is its input's estimate. */
function planRows(plan: PlanNode | undefined): number {
  if (!plan) return 0;
  if (plan["Node Type"] === "ModifyTable")
    return Math.max(plan["Plan Rows"] ?? 0, plan.Plans?.[0]?.["Plan Rows"] ?? 0);
  return Math.ceil(plan["Plan Rows"] ?? 0);
}

interface ExecutionOutcome {
  rows: Record<string, unknown>[];
  rowCount: number;
  statements: { command: string; rowCount: number }[];
  changedSession: boolean;
}

async function executeInTransaction(
  client: pg.PoolClient,
  deps: MeteredQueryDeps,
  statements: GuardedStatement[],
  params?: unknown[],
): Promise<ExecutionOutcome> {
  await client.query("BEGIN");
  const outcome: ExecutionOutcome = { rows: [], rowCount: 0, statements: [], changedSession: false };
  for (const statement of statements) {
    if (statement.transactionControl && !/^(SAVEPOINT|RELEASE|ROLLBACK TO)/i.test(statement.sql)) {
      // The request is the transaction: BEGIN/COMMIT are acknowledged; ROLLBACK undoes the work so far.
      if (/^(ROLLBACK|ABORT)\b/i.test(statement.sql)) await client.query("ROLLBACK; BEGIN");
      outcome.statements.push({ command: statement.command, rowCount: 0 });
      continue;
    }
    if (SESSION_STATE_COMMANDS.has(statement.command)) outcome.changedSession = true;
    const remaining = deps.rowCap - outcome.rowCount;
    const { rows, rowCount } = await readWithCap(client, deps, statement.sql, params, remaining);
    outcome.rows = rows;
    outcome.rowCount += rowCount;
    outcome.statements.push({ command: statement.command, rowCount });
  }
  return outcome;
}

/** Runs one statement through a cursor, reading at most `cap + 1` rows so an oversized result is never buffered. */
async function readWithCap(
  client: pg.PoolClient,
  deps: MeteredQueryDeps,
  sql: string,
  params: unknown[] | undefined,
  cap: number,
): Promise<{ rows: Record<string, unknown>[]; rowCount: number }> {
  const cursor = client.query(new Cursor<Record<string, unknown>>(sql, params));
  const timer = armCancelTimer(client, deps.statementTimeoutMs);
  let rows: Record<string, unknown>[];
  try {
    rows = await cursor.read(cap + 1);
  } finally {
    timer.disarm();
  }
  // Close the portal before anything else is sent on this connection (ROLLBACK would queue behind it).
  await cursor.close();
  if (rows.length > cap) {
    throw new QueryError(
      400,
      `result too large: more than ${deps.rowCap} rows (PGTOLL_ROW_CAP); add a LIMIT or narrow the query. Nothing was charged`,
    );
  }
  const result = (cursor as unknown as { _result: { rowCount: number | null } })._result;
  return { rows, rowCount: Math.max(rows.length, result.rowCount ?? 0) };
}

/**
 * pgtoll's own enforcement of the statement timeout, in case the server's `statement_timeout` is not in force:
 * a CancelRequest shortly after the limit, and the connection is discarded if even that does not end it.
 */
function armCancelTimer(client: pg.PoolClient, statementTimeoutMs: number): { disarm(): void } {
  const internals = client as unknown as { processID: number; secretKey: number; host: string; port: number };
  const cancel = setTimeout(() => {
    void sendCancelRequest(internals.host, internals.port, internals.processID, internals.secretKey);
  }, statementTimeoutMs + 500);
  const kill = setTimeout(() => {
    (client as unknown as { connection: { stream: { destroy(): void } } }).connection.stream.destroy();
  }, statementTimeoutMs + 3000);
  return {
    disarm() {
      clearTimeout(cancel);
      clearTimeout(kill);
    },
  };
}
