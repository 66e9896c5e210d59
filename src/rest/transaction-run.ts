import type pg from "pg";
import type { GuardedStatement } from "../guard/index.js";
import type { ResultLease } from "../providers/result-memory.js";
import type { EstimateCache } from "./estimate-cache.js";
import { estimateStatements } from "./plan-rows.js";
import { QueryError } from "./query-errors.js";
import type { RunOutcome } from "./run-outcome.js";
import { type StatementTimeLimit, withStatementTimer } from "./statement-timer.js";
import { type PipelineStep, runPipeline } from "./upstream-pipeline.js";

export interface TransactionRunSettings {
  rowCap: number;
  /** The price counts statement time: each statement's time is measured apart (see runPipeline). */
  timed?: boolean;
  statementTimeoutMs: number;
  /** What pays for the statements' time, when the price counts it: each takes its time from it. */
  timeLimit?: StatementTimeLimit;
  /** A statement that writes more rows is rolled back with the whole request (403). */
  maxRowsWritten: number;
  /** The transaction's lock_timeout: an agent's write does not wait long on the provider's locks. */
  lockTimeoutMs: number;
}

/** Commands after which the pooled session must be reset before another agent uses it. */
const SESSION_STATE_COMMANDS = new Set(["SET", "RESET", "PREPARE", "DECLARE CURSOR", "DECLARE", "LISTEN"]);

/**
 * Runs the statements of one request as one read-write transaction on `client`, committed only after
 * `secure(outcome)` resolved (it throws when the result cannot be paid for; the caller then rolls back).
 * Before anything runs, each statement is explained for the estimate (or its recent estimate reused). BEGIN travels with the first statement,
 * and each statement reads at most the rows left under `rowCap` (+1, to tell an oversized result), in one
 * round trip. Transaction control statements (BEGIN/COMMIT) are acknowledged, not forwarded: the request is the
 * transaction; ROLLBACK undoes the work so far; savepoints work. Session state (SET, PREPARE, cursors) is
 * discarded before the connection goes back to the pool.
 */
export async function executeInTransaction(
  client: pg.ClientBase,
  settings: TransactionRunSettings,
  statements: GuardedStatement[],
  params: readonly unknown[] | undefined,
  estimates: EstimateCache,
  providerId: string,
  secure: (outcome: RunOutcome) => Promise<void>,
  /** The request's share of the result memory: its rows' bytes are counted in it as they arrive. */
  lease?: ResultLease,
): Promise<RunOutcome> {
  const planned = await estimateStatements(client, statements, params, estimates, providerId);
  const outcome: RunOutcome = { rows: [], rowBytes: [], rowCount: 0, statements: [], runs: [] };
  let began = false;
  let changedSession = false;
  for (const [index, statement] of statements.entries()) {
    if (statement.transactionControl && !/^(SAVEPOINT|RELEASE|ROLLBACK TO)/i.test(statement.sql)) {
      if (began && /^(ROLLBACK|ABORT)\b/i.test(statement.sql)) await client.query("ROLLBACK; BEGIN");
      outcome.statements.push({ command: statement.command, rowCount: 0 });
      continue;
    }
    if (SESSION_STATE_COMMANDS.has(statement.command)) changedSession = true;
    const remaining = settings.rowCap - outcome.rowCount;
    const steps: PipelineStep[] = began
      ? []
      : [{ text: "BEGIN" }, { text: `SET LOCAL lock_timeout = ${Math.trunc(settings.lockTimeoutMs)}` }];
    steps.push({ text: statement.sql, values: params, maxRows: remaining + 1 });
    began = true;
    const results = await withStatementTimer(
      client,
      settings.statementTimeoutMs,
      runPipeline(client, steps, settings.timed, lease),
      settings.timeLimit,
    );
    const result = results[steps.length - 1]!;
    if (result.rows.length > remaining) {
      throw new QueryError(
        400,
        `result too large: more than ${settings.rowCap} rows (PGTOLL_ROW_CAP); add a LIMIT or narrow the query. Nothing was charged`,
      );
    }
    const rowCount = Math.max(result.rows.length, result.rowCount ?? 0);
    if (statement.writes && (result.rowCount ?? 0) > settings.maxRowsWritten) {
      throw new QueryError(
        403,
        `the statement wrote ${result.rowCount} rows, more than the provider allows in one statement (${settings.maxRowsWritten}); it was rolled back and nothing was charged`,
      );
    }
    outcome.rows = result.rows;
    outcome.rowBytes = result.rowBytes;
    outcome.rowCount += rowCount;
    outcome.statements.push({ command: statement.command, rowCount });
    outcome.runs.push({
      relations: statement.relations,
      usage: { rows: rowCount, bytes: result.rowBytes.reduce((sum, size) => sum + size, 0), ms: result.ms },
      estimated: planned[index]!,
      writes: statement.writes,
    });
  }
  await secure(outcome);
  if (began) await client.query("COMMIT");
  if (changedSession) await client.query("DISCARD ALL");
  return outcome;
}
