import type { MeteredStatement } from "../billing/request-cost.js";
import type { PlanEstimate } from "./estimate-cache.js";

/** One statement that ran upstream: what the planner expected of it and what it used. */
export interface StatementRun extends MeteredStatement {
  estimated: PlanEstimate;
  /** Whether it may write (its rows cannot be cut off to fit a budget: the write would be half paid). */
  writes: boolean;
}

/** What running the statements produced, before it is paid for. */
export interface RunOutcome {
  /** The rows returned: those of the last statement that returned rows. */
  rows: Record<string, unknown>[];
  /** The DataRow payload bytes of each of `rows`, in order. */
  rowBytes: number[];
  rowCount: number;
  statements: { command: string; rowCount: number }[];
  /** Every statement that ran upstream, in order (BEGIN and COMMIT of the request's own are not among them). */
  runs: StatementRun[];
}
