/**
 * The figures of a provider's `query` ledger entries that every analytics query sums, as SQL expressions over
 * an entry `e`. A wire-proxy charge window carries `statements` and `rowCount` for all its statements; a
 * REST entry is one request (`rowCount`, no `statements`: it counts as one).
 */
export const REVENUE_SQL = "(-e.amount_micro)";
export const STATEMENTS_SQL = "COALESCE((e.metadata->>'statements')::bigint, 1)";
export const ROWS_SQL = "COALESCE((e.metadata->>'rowCount')::bigint, 0)";

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

export const NO_CHARGES: Readonly<ChargeFigures> = Object.freeze({
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

export function figuresOf(row: ChargeSumsRow | undefined): ChargeFigures {
  if (!row) return { ...NO_CHARGES };
  return {
    revenueMicro: BigInt(row.revenue_micro ?? 0),
    statements: Number(row.statements ?? 0),
    rows: Number(row.rows ?? 0),
    agents: Number(row.agents ?? 0),
  };
}

/** The SELECT list that sums an entry set into a {@link ChargeSumsRow}. */
export const CHARGE_SUMS_SQL = `COALESCE(sum(${REVENUE_SQL}), 0)::text AS revenue_micro,
  COALESCE(sum(${STATEMENTS_SQL}), 0)::text AS statements,
  COALESCE(sum(${ROWS_SQL}), 0)::text AS rows,
  count(DISTINCT e.agent_wallet)::text AS agents`;
