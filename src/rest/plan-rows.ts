import type pg from "pg";
import type { GuardedStatement } from "../guard/index.js";
import type { EstimateCache, PlanEstimate } from "./estimate-cache.js";

export interface PlanNode {
  "Node Type"?: string;
  "Plan Rows"?: number;
  "Plan Width"?: number;
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
 * The planner's estimate of a plan's result: its rows, and its bytes as rows x the plan's average row width (the
 * DataRow payload a row takes is about that; a write without RETURNING sends no row data).
 */
export function planEstimate(plan: PlanNode | undefined): PlanEstimate {
  const rows = planRows(plan);
  const sendsRows = plan?.["Node Type"] !== "ModifyTable" || (plan["Plan Rows"] ?? 0) > 0;
  return { rows, bytes: sendsRows ? Math.ceil(rows * (plan?.["Plan Width"] ?? 0)) : 0 };
}

/**
 * The planner's estimate of each statement, one EXPLAIN per statement (unless `estimates` has a recent one),
 * before any of them runs; statements it cannot plan (not explainable, or a table an earlier statement creates)
 * are estimated at 0.
 */
export async function estimateStatements(
  client: pg.ClientBase,
  statements: GuardedStatement[],
  params: readonly unknown[] | undefined,
  estimates: EstimateCache,
  providerId: string,
): Promise<PlanEstimate[]> {
  const planned: PlanEstimate[] = [];
  for (const statement of statements) {
    planned.push(
      statement.explainable
        ? await estimateOne(client, statement, params, estimates, providerId)
        : NOT_PLANNED,
    );
  }
  return planned;
}

/** The estimate of a statement the planner cannot plan (not explainable, or a table an earlier one creates). */
export const NOT_PLANNED: PlanEstimate = Object.freeze({ rows: 0, bytes: 0 });

async function estimateOne(
  client: pg.ClientBase,
  statement: GuardedStatement,
  params: readonly unknown[] | undefined,
  estimates: EstimateCache,
  providerId: string,
): Promise<PlanEstimate> {
  const known = estimates.get(providerId, statement.sql);
  if (known !== undefined) return known;
  try {
    const { rows } = await client.query<{ "QUERY PLAN": QueryPlan[] }>(
      `EXPLAIN (FORMAT JSON) ${statement.sql}`,
      params as unknown[] | undefined,
    );
    const planned = planEstimate(rows[0]?.["QUERY PLAN"]?.[0]?.Plan);
    estimates.set(providerId, statement.sql, planned);
    return planned;
  } catch {
    // The statement's own execution reports the real error.
    return NOT_PLANNED;
  }
}
