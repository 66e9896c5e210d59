import { formatMicro } from "../billing/money.js";
import { SqlState } from "../db/sql-state.js";
import { type ProxySession, StatementFailure } from "./proxy-session.js";
import type { StatementResult } from "./statement-read.js";
import { estimateStatement } from "./tool-runs.js";

/** A `query` with `max_cost`: its result and what the whole call cost, or why it was not run. */
export type BudgetedQuery =
  | { refusal: string }
  | { result: StatementResult; costMicro: bigint; estimateMicro: bigint; balanceMicro: bigint };

/**
 * Whether `error` is the session's budget refusing a statement whole (PT422, not the daily limit): one whose
 * minimum it does not pay for, or a write, which is rolled back rather than cut short.
 */
function isBudgetRefusal(error: unknown): boolean {
  return (
    error instanceof StatementFailure &&
    error.code === SqlState.budgetExceeded &&
    error.message.startsWith("pgtoll.max_session_cost")
  );
}

/**
 * Runs `sql` so that the whole call costs at most `budgetMicro`: the planner's estimate first (an EXPLAIN, charged
 * as a statement, itself within the budget), nothing more when the estimate is above what is left, and otherwise
 * the statement under a session budget (`pgtoll.max_session_cost`) of what is left. A result that would pass it is
 * cut off by the proxy at the rows it pays for, and they are returned: every row charged is in the answer.
 */
export async function queryWithinBudget(
  session: ProxySession,
  sql: string,
  params: unknown[],
  maxRows: number,
  budgetMicro: bigint,
): Promise<BudgetedQuery> {
  let estimateMicro = 0n;
  const refusal = (why: string) => ({
    refusal:
      `budget_exceeded: ${why} is above max_cost ${formatMicro(budgetMicro)} USDC; the statement was not ` +
      `run (this call cost ${formatMicro(estimateMicro)} USDC, for the estimate)`,
  });
  try {
    const estimate = await estimateStatement(session, sql, params, budgetMicro);
    estimateMicro = estimate.costMicro;
    if (estimate.cutOff) return refusal("the cost of the estimate run first");
    const leftMicro = budgetMicro - estimateMicro;
    if (estimate.estimatedCostMicro > leftMicro)
      return refusal(
        `the estimated cost ${estimate.view.estimatedCost} USDC, with the estimate's own ` +
          `${formatMicro(estimateMicro)} USDC,`,
      );
    const run = await session.statement(sql, params, maxRows, leftMicro);
    return { ...run, costMicro: estimateMicro + run.costMicro, estimateMicro };
  } catch (error) {
    if (isBudgetRefusal(error)) {
      estimateMicro += (error as StatementFailure).costMicro;
      const minimum = formatMicro((await session.price()).minimumMicro ?? 0n);
      return refusal(
        `the statement's cost (at least the provider's minimum of ${minimum} USDC per statement; a write's ` +
          `whole cost, as a write is not cut short), with the estimate's own ${formatMicro(estimateMicro)} USDC,`,
      );
    }
    // A failure after the estimate was charged for it too.
    if (error instanceof StatementFailure && estimateMicro > 0n)
      throw new StatementFailure(error.error, estimateMicro + error.costMicro);
    throw error;
  }
}
