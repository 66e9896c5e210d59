import type { Queryable } from "../billing/ledger.js";
import type { RefusalKind } from "./refusal-tally.js";
import type { TimeRange } from "./time-range.js";

/** Refusals of one rule (or funds reason) over a range. */
export interface RefusalCount {
  kind: RefusalKind;
  rule: string;
  refusals: number;
}

/**
 * The provider's refusals over the range, most first. Counts are kept per hour: a range is widened to the whole
 * hours it touches.
 */
const REFUSALS_SQL = `SELECT kind, rule, sum(refusals)::text AS refusals
  FROM refusal_counts
 WHERE provider_id = $1 AND hour >= date_trunc('hour', $2::timestamptz, 'UTC') AND hour < $3
 GROUP BY kind, rule
 ORDER BY sum(refusals) DESC, kind, rule`;

/** The provider's refusals over `range`, by kind and rule, most first. */
export async function refusalCounts(
  db: Queryable,
  providerId: string,
  range: TimeRange,
): Promise<RefusalCount[]> {
  const { rows } = await db.query<{ kind: RefusalKind; rule: string; refusals: string }>(REFUSALS_SQL, [
    providerId,
    range.from,
    range.to,
  ]);
  return rows.map((row) => ({ kind: row.kind, rule: row.rule, refusals: Number(row.refusals) }));
}
