/**
 * The figures of a provider's `query` ledger entries that every analytics query sums, as SQL expressions over
 * an entry `e`. A wire-proxy charge window carries `statements` and `rowCount` for all its statements; a
 * REST entry is one request (`rowCount`, no `statements`: it counts as one).
 */
const REVENUE_SQL = "(-e.amount_micro)";
const STATEMENTS_SQL = "COALESCE((e.metadata->>'statements')::bigint, 1)";
const ROWS_SQL = "COALESCE((e.metadata->>'rowCount')::bigint, 0)";

/** The WHERE clause of a provider's charges in [$2, $3): ledger_entries_provider_time_idx finds them. */
export const PROVIDER_CHARGES_IN_RANGE =
  "e.provider_id = $1 AND e.type = 'query' AND e.created_at >= $2 AND e.created_at < $3";

/** Summed figures of a set of charges: micro-USDC and counts. */
export interface ChargeFigures {
  revenueMicro: bigint;
  statements: number;
  rows: number;
  agents: number;
}

const NO_CHARGES: Readonly<ChargeFigures> = Object.freeze({
  revenueMicro: 0n,
  statements: 0,
  rows: 0,
  agents: 0,
});

/** A row of sums as PostgreSQL returns it (bigint sums as strings, node-postgres's default for int8). */
export interface ChargeSumsRow {
  revenue_micro: string | null;
  statements: string | null;
  rows: string | null;
  agents: string | null;
}

/** The figures of a row of sums; all zero when there is no row (nothing was charged). */
export function figuresOf(row: ChargeSumsRow | undefined): ChargeFigures {
  if (!row) return { ...NO_CHARGES };
  return {
    revenueMicro: BigInt(row.revenue_micro ?? 0),
    statements: Number(row.statements ?? 0),
    rows: Number(row.rows ?? 0),
    agents: Number(row.agents ?? 0),
  };
}

/** The SELECT list that sums one agent's entries (a {@link ChargeSumsRow} whose `agents` is 1). */
export const AGENT_SUMS_SQL = `sum(${REVENUE_SQL})::text AS revenue_micro,
  sum(${STATEMENTS_SQL})::text AS statements,
  sum(${ROWS_SQL})::text AS rows,
  '1' AS agents`;

/**
 * The provider's charges in range summed per value of `group` (as column `grp`) into {@link ChargeSumsRow}s.
 * Agents are counted by grouping per agent first and counting the groups: a hash of a provider's few agents
 * stays in memory, where count(DISTINCT) sorts every entry (to disk past work_mem). Measured on one provider's
 * 333 000 entries of a month (bench/analytics-ledger.ts): its summary took 2.7 s with count(DISTINCT), 0.85 s so.
 */
export function chargeSumsBy(group: string): string {
  return `WITH per_agent AS (
  SELECT ${group} AS grp, e.agent_wallet, sum(${REVENUE_SQL}) AS revenue, sum(${STATEMENTS_SQL}) AS statements,
         sum(${ROWS_SQL}) AS rows
    FROM ledger_entries e
   WHERE ${PROVIDER_CHARGES_IN_RANGE}
   GROUP BY 1, 2)
SELECT grp, sum(revenue)::text AS revenue_micro, sum(statements)::text AS statements, sum(rows)::text AS rows,
       count(*)::text AS agents
  FROM per_agent
 GROUP BY grp`;
}
