import type pg from "pg";
import type { GuardedStatement } from "../guard/index.js";
import type { EstimateCache } from "./estimate-cache.js";

export interface PlanNode {
  "Node Type"?: string;
  "Plan Rows"?: number;
  Plans?: PlanNode[];
}

/** One element of `EXPLAIN (FORMAT JSON)`'s "QUERY PLAN" array. */
export interface QueryPlan {
  Plan?: PlanNode;
}

/** The planner's row estimate of a plan. A ModifyTable node reports 0 rows without RETURNING; what it writes is its input's estimate. */
export function planRows(plan: PlanNode | undefined): number {
  if (!plan) return 0;
  if (plan["Node Type"] === "ModifyTable")
    return Math.ceil(Math.max(plan["Plan Rows"] ?? 0, plan.Plans?.[0]?.["Plan Rows"] ?? 0));
  return Math.ceil(plan["Plan Rows"] ?? 0);
}

/**
 * Sum of the planner's row estimates, one EXPLAIN per statement (unless `estimates` has a recent one), before
 * any of them runs; statements it cannot plan (yet: a table an earlier statement creates) count 0.
 */
export async function estimateRows(
  client: pg.ClientBase,
  statements: GuardedStatement[],
  params: readonly unknown[] | undefined,
  estimates: EstimateCache,
  providerId: string,
): Promise<number> {
  let total = 0;
  for (const statement of statements) {
    if (!statement.explainable) continue;
    const known = estimates.get(providerId, statement.sql);
    if (known !== undefined) {
      total += known;
      continue;
    }
    try {
      const { rows } = await client.query<{ "QUERY PLAN": QueryPlan[] }>(
        `EXPLAIN (FORMAT JSON) ${statement.sql}`,
        params as unknown[] | undefined,
      );
      const planned = planRows(rows[0]?.["QUERY PLAN"]?.[0]?.Plan);
      estimates.set(providerId, statement.sql, planned);
      total += planned;
    } catch {
      // The statement's own execution reports the real error.
    }
  }
  return total;
}
