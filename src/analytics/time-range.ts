/** A half-open interval of time, [from, to), over which a provider's figures are read. */
export interface TimeRange {
  from: Date;
  to: Date;
}

/** Bucket widths of the earnings series; each is a PostgreSQL `date_trunc` unit, taken in UTC. */
export type Granularity = "hour" | "day";

/** The width of a bucket of each granularity, ms. */
export const GRANULARITY_MS: Readonly<Record<Granularity, number>> = { hour: 3_600_000, day: 86_400_000 };

/** The period of the same length just before `range`: what a summary compares with. */
export function previousPeriod(range: TimeRange): TimeRange {
  const length = range.to.getTime() - range.from.getTime();
  return { from: new Date(range.from.getTime() - length), to: range.from };
}

/** The start of the UTC bucket of `granularity` that holds `time`. */
export function bucketStart(time: Date, granularity: Granularity): Date {
  const width = GRANULARITY_MS[granularity];
  return new Date(Math.floor(time.getTime() / width) * width);
}

/** How many buckets of `granularity` a series over `range` has, the partial first and last included. */
export function bucketCount(range: TimeRange, granularity: Granularity): number {
  const width = GRANULARITY_MS[granularity];
  const first = bucketStart(range.from, granularity).getTime();
  return Math.ceil((range.to.getTime() - first) / width);
}
