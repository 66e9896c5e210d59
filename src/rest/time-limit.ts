import { msAffordable, type Price, type StatementUsage } from "../billing/cost.js";
import type { DailyLimit } from "../billing/daily-limits.js";
import { formatMicro } from "../billing/money.js";
import { BUDGET_EXCEEDED, QueryError } from "./query-errors.js";
import type { StatementTimeLimit } from "./statement-timer.js";

/**
 * What bounds a request's statement time, beside each statement's own timeout: the funds it holds, or its
 * `maxCost`.
 */
export type TimeBoundBy = "funds" | "max-cost";

/** A request's time bound and what sets it. */
export interface RequestTimeBound {
  limit: StatementTimeLimit;
  by: TimeBoundBy;
}

/**
 * The lesser of what `coveredMicro` (the agent's funds held for the request) and `maxCostMicro` pay for in
 * statement time, after the statement's expected rows and bytes (`usage`). The statement timeout bounds each
 * statement besides (statement-timer.ts).
 */
export function requestTimeBound(
  coveredMicro: bigint,
  usage: Omit<StatementUsage, "ms">,
  price: Price,
  maxCostMicro: bigint | undefined,
): RequestTimeBound {
  const budgetMs =
    maxCostMicro === undefined ? Number.POSITIVE_INFINITY : msAffordable(maxCostMicro, usage, price);
  // Funds held up to maxCost pay for exactly its time: the budget is then what stops it.
  const fundsMs = msAffordable(coveredMicro, usage, price);
  const by: TimeBoundBy = fundsMs < budgetMs ? "funds" : "max-cost";
  const ms = by === "funds" ? fundsMs : budgetMs;
  return { limit: { leftMs: ms, usedMs: 0, reached: false }, by };
}

/**
 * The answer to a request stopped at its time bound, charged `chargedMicro` for its time: 422 `budget_exceeded`
 * for its maxCost or the agent's daily limit (`dailyLimit`, when that is what kept the funds short), else 402.
 */
export function timeLimitError(
  by: TimeBoundBy,
  usedMs: number,
  chargedMicro: bigint,
  maxCostMicro: bigint | undefined,
  dailyLimit: DailyLimit | null,
): QueryError {
  const stopped = `the statement was stopped after ${Math.round(usedMs)} ms`;
  const charged = `its time, ${formatMicro(chargedMicro)} USDC, was charged`;
  if (by === "max-cost" && maxCostMicro !== undefined)
    return new QueryError(
      422,
      `over budget: ${stopped}, the time maxCost ${formatMicro(maxCostMicro)} USDC pays for; ${charged}`,
      BUDGET_EXCEEDED,
    );
  if (dailyLimit?.dailyLimitMicro != null)
    return new QueryError(
      422,
      `over budget: ${stopped}, the time your daily limit with this provider (${formatMicro(dailyLimit.dailyLimitMicro)} USDC, ${formatMicro(dailyLimit.spentTodayMicro)} spent today) pays for; ${charged}`,
      BUDGET_EXCEEDED,
    );
  return new QueryError(
    402,
    `insufficient balance: ${stopped}, the time the available balance pays for; ${charged}. Deposit funds with this provider to run it longer`,
  );
}
