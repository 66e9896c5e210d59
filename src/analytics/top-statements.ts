import type { Queryable } from "../billing/ledger.js";
import { parseMicro } from "../billing/money.js";
import { PROVIDER_CHARGES_IN_RANGE } from "./charge-figures.js";
import type { TimeRange } from "./time-range.js";

/** A statement shape's figures over a range: calls, rows and revenue, with one sample of its text. */
export interface ShapeEarnings {
  fingerprint: string;
  sample: string;
  /**
   * The text to normalise for display: the window's own normalised sample, or a REST entry's whole statement
   * (normalised whole, then cut); `null` for windows written without one, whose cut sample is all there is.
   */
  text: string | null;
  calls: number;
  rows: number;
  revenueMicro: bigint;
}

/** Calls, rows and revenue of the shapes a window entry folded into `otherShapes` (beyond its 20 listed). */
export interface UnlistedShapes {
  calls: number;
  rows: number;
  revenueMicro: bigint;
}

/**
 * Every line of the provider's charges over the range, one per shape: the `shapes` breakdown of each wire-proxy
 * charge window (costs there are 6-decimal strings, summed exactly as numeric), and each REST entry as one
 * call of its `fingerprint` (a REST entry written without one counts under its own text).
 */
const SHAPE_LINES = `WITH charges AS (
  SELECT e.metadata, e.amount_micro FROM ledger_entries e
   WHERE ${PROVIDER_CHARGES_IN_RANGE}),
lines AS (
  SELECT s->>'fingerprint' AS fingerprint, s->>'sample' AS sample, s->>'normalized' AS text,
         (s->>'calls')::bigint AS calls,
         (s->>'rows')::bigint AS rows, (s->>'cost')::numeric AS revenue
    FROM charges c CROSS JOIN LATERAL jsonb_array_elements(c.metadata->'shapes') s
   WHERE jsonb_typeof(c.metadata->'shapes') = 'array'
  UNION ALL
  SELECT COALESCE(c.metadata->>'fingerprint', 'text:' || md5(c.metadata->>'sql')), left(c.metadata->>'sql', 200),
         c.metadata->>'sql', 1,
         COALESCE((c.metadata->>'rowCount')::bigint, 0), (-c.amount_micro)::numeric / 1000000
    FROM charges c
   WHERE c.metadata ? 'sql')`;

/** The shapes of the range summed by fingerprint, most revenue first, `$4` of them. */
export const TOP_SHAPES_SQL = `${SHAPE_LINES}
SELECT fingerprint, min(sample) AS sample, min(text) AS text, sum(calls)::text AS calls, sum(rows)::text AS rows,
       round(sum(revenue), 6)::text AS revenue
  FROM lines GROUP BY fingerprint
 ORDER BY sum(revenue) DESC, sum(calls) DESC, fingerprint
 LIMIT $4`;

/** What the range's windows folded into `otherShapes`, summed. */
export const UNLISTED_SQL = `SELECT COALESCE(sum((e.metadata->'otherShapes'->>'calls')::bigint), 0)::text AS calls,
       COALESCE(sum((e.metadata->'otherShapes'->>'rows')::bigint), 0)::text AS rows,
       round(COALESCE(sum((e.metadata->'otherShapes'->>'cost')::numeric), 0), 6)::text AS revenue
  FROM ledger_entries e
 WHERE ${PROVIDER_CHARGES_IN_RANGE}
   AND e.metadata ? 'otherShapes'`;

interface SumsRow {
  calls: string;
  rows: string;
  revenue: string;
}

/** A numeric sum of 6-decimal amounts as micro-USDC (PostgreSQL prints it with at most 6 places). */
function microOf(text: string): bigint {
  const micro = parseMicro(text);
  if (micro === null) throw new Error(`not a 6-decimal amount: ${text}`);
  return micro;
}

/** The `limit` shapes that earned most over the range, and what the windows folded beyond their listed shapes. */
export async function topStatements(
  db: Queryable,
  providerId: string,
  range: TimeRange,
  limit: number,
): Promise<{ shapes: ShapeEarnings[]; unlisted: UnlistedShapes }> {
  const params = [providerId, range.from, range.to];
  const [top, unlisted] = await Promise.all([
    db.query<SumsRow & { fingerprint: string; sample: string; text: string | null }>(TOP_SHAPES_SQL, [
      ...params,
      limit,
    ]),
    db.query<SumsRow>(UNLISTED_SQL, params),
  ]);
  const folded = unlisted.rows[0] ?? { calls: "0", rows: "0", revenue: "0" };
  return {
    shapes: top.rows.map((row) => ({
      fingerprint: row.fingerprint,
      sample: row.sample,
      text: row.text,
      calls: Number(row.calls),
      rows: Number(row.rows),
      revenueMicro: microOf(row.revenue),
    })),
    unlisted: {
      calls: Number(folded.calls),
      rows: Number(folded.rows),
      revenueMicro: microOf(folded.revenue),
    },
  };
}
