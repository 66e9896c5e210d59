import type pg from "pg";
import { SqlState } from "../db/sql-state.js";
import type { GuardedStatement } from "../guard/index.js";
import type { ResultLease } from "../providers/result-memory.js";
import type { EstimateCache, PlanEstimate } from "./estimate-cache.js";
import { planEstimate, type QueryPlan } from "./plan-rows.js";
import { QueryError } from "./query-errors.js";
import type { RunOutcome } from "./run-outcome.js";
import { type StatementTimeLimit, withStatementTimer } from "./statement-timer.js";
import { type PipelineError, type PipelineStep, runPipeline } from "./upstream-pipeline.js";

export interface ReadOnlyRunSettings {
  rowCap: number;
  /** The price counts statement time: each statement's time is measured apart (see runPipeline). */
  timed?: boolean;
  statementTimeoutMs: number;
  /** What pays for the statements' time, when the price counts it: each takes its time from it. */
  timeLimit?: StatementTimeLimit;
}

/**
 * Runs one reading statement in a single round trip, on a read-only session (`default_transaction_read_only=on`
 * at connect): `EXPLAIN (FORMAT JSON)` of it (the estimate, planned before the statement runs; skipped when
 * `estimates` has a recent one for this text), then the statement reading at most `rowCap + 1` rows, in the
 * implicit transaction their Sync ends. PostgreSQL itself refuses any write in it (a function with side effects,
 * nextval), so paying for the result afterwards is safe: if the agent cannot pay, it gets nothing and nothing
 * changed. A statement that does try to write answers "read-write", and the caller runs it in a read-write
 * transaction instead. The statement timeout is the session's. No BEGIN or COMMIT of its own: an error ends the
 * implicit transaction at the Sync, with nothing left open.
 */
export async function runReadOnly(
  client: pg.ClientBase,
  settings: ReadOnlyRunSettings,
  statement: GuardedStatement,
  params: readonly unknown[] | undefined,
  estimates: EstimateCache,
  providerId: string,
  /** The request's share of the result memory: its rows' bytes are counted in it as they arrive. */
  lease?: ResultLease,
): Promise<RunOutcome | "read-write"> {
  const known = statement.explainable ? estimates.get(providerId, statement.sql) : NOT_PLANNED;
  const run = await runOnce(client, settings, statement, params, known === undefined, lease);
  if (run === "read-write") return run;
  const { outcome, planned } = run;
  if (planned !== undefined) estimates.set(providerId, statement.sql, planned);
  outcome.runs[0]!.estimated = planned ?? known ?? NOT_PLANNED;
  return outcome;
}

const NOT_PLANNED: PlanEstimate = Object.freeze({ rows: 0, bytes: 0 });

async function runOnce(
  client: pg.ClientBase,
  settings: ReadOnlyRunSettings,
  statement: GuardedStatement,
  params: readonly unknown[] | undefined,
  withEstimate: boolean,
  lease: ResultLease | undefined,
): Promise<{ outcome: RunOutcome; planned: PlanEstimate | undefined } | "read-write"> {
  const steps: PipelineStep[] = [];
  if (withEstimate)
    steps.push({ text: `EXPLAIN (FORMAT JSON) ${statement.sql}`, values: params, maxRows: 1 });
  const statementStep = steps.length;
  steps.push({ text: statement.sql, values: params, maxRows: settings.rowCap + 1 });

  let results: Awaited<ReturnType<typeof runPipeline>>;
  try {
    results = await withStatementTimer(
      client,
      settings.statementTimeoutMs,
      runPipeline(client, steps, settings.timed, lease),
      settings.timeLimit,
    );
  } catch (error) {
    const failed = error as PipelineError;
    if (failed.failedStep === statementStep && failed.code === SqlState.readOnlyTransaction)
      return "read-write";
    if (withEstimate && failed.failedStep === statementStep - 1 && failed.code !== undefined) {
      // The planner could not explain it: the statement's own execution reports the real error, if any.
      return runOnce(client, settings, statement, params, false, lease);
    }
    throw error;
  }

  const result = results[statementStep]!;
  if (result.rows.length > settings.rowCap) {
    throw new QueryError(
      400,
      `result too large: more than ${settings.rowCap} rows (PGTOLL_ROW_CAP); add a LIMIT or narrow the query. Nothing was charged`,
    );
  }
  const plan = withEstimate
    ? (results[statementStep - 1]!.rows[0]?.["QUERY PLAN"] as QueryPlan[] | undefined)
    : undefined;
  const rowCount = Math.max(result.rows.length, result.rowCount ?? 0);
  const bytes = result.rowBytes.reduce((sum, size) => sum + size, 0);
  return {
    outcome: {
      rows: result.rows,
      rowBytes: result.rowBytes,
      rowCount,
      statements: [{ command: statement.command, rowCount }],
      runs: [
        {
          relations: statement.relations,
          usage: { rows: rowCount, bytes, ms: result.ms },
          estimated: NOT_PLANNED,
          writes: false,
        },
      ],
    },
    planned: withEstimate ? planEstimate(plan?.[0]?.Plan) : undefined,
  };
}
