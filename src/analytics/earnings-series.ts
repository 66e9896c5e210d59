import type { Queryable } from "../billing/ledger.js";
import { type ChargeFigures, type ChargeSumsRow, chargeSumsBy, figuresOf } from "./charge-figures.js";
import { bucketStart, GRANULARITY_MS, type Granularity, type TimeRange } from "./time-range.js";

/** One bucket of the earnings series: its UTC start and the figures of the charges written in it. */
export interface EarningsBucket extends ChargeFigures {
  start: Date;
}

/** Sums per UTC bucket; buckets without charges are absent here and filled in below. */
export const EARNINGS_SQL = chargeSumsBy("date_trunc($4, e.created_at, 'UTC')");

/**
 * The provider's earnings over `range` in buckets of `granularity`, every bucket from the one holding
 * `range.from` to the one holding the last instant before `range.to`, empty ones included (all zero).
 * Agents are counted per bucket: an agent active in two buckets counts in both.
 */
export async function earningsSeries(
  db: Queryable,
  providerId: string,
  range: TimeRange,
  granularity: Granularity,
): Promise<EarningsBucket[]> {
  const { rows } = await db.query<ChargeSumsRow & { grp: Date }>(EARNINGS_SQL, [
    providerId,
    range.from,
    range.to,
    granularity,
  ]);
  const byStart = new Map(rows.map((row) => [new Date(row.grp).getTime(), row]));
  const width = GRANULARITY_MS[granularity];
  const buckets: EarningsBucket[] = [];
  for (let start = bucketStart(range.from, granularity).getTime(); start < range.to.getTime(); start += width)
    buckets.push({ start: new Date(start), ...figuresOf(byStart.get(start)) });
  return buckets;
}
