import type { CostBreakdown } from "../billing/cost.js";
import { costParts } from "../billing/cost-parts.js";
import { formatMicro } from "../billing/money.js";
import type { QueryCost } from "./session-meter.js";

/**
 * The last statement's or query's cost and its parts (a query's: summed over its statements, with their count),
 * as JSON: `SHOW pgtoll.last_statement_cost` and `pgtoll.last_query_cost`, and the `pgtoll.last_query_cost`
 * ParameterStatus a REST session gets with each query's answer.
 */
export function lastCostText(cost: CostBreakdown | QueryCost | null): string {
  if (!cost) return "{}";
  const statements = "statements" in cost ? { statements: cost.statements } : {};
  return JSON.stringify({ ...statements, ...costParts(cost), cost: formatMicro(cost.costMicro) });
}
