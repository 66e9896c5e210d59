import type { Queryable } from "../billing/ledger.js";
import { type ChargeFigures, type ChargeSumsRow, chargeSumsBy, figuresOf } from "./charge-figures.js";
import { previousPeriod, type TimeRange } from "./time-range.js";

/** A provider's figures over a range and over the period of the same length before it. */
export interface ProviderSummary {
  current: ChargeFigures;
  previous: ChargeFigures;
  previousRange: TimeRange;
}

/** Both periods in one scan of the provider's charges over [previous.from, range.to). */
export const SUMMARY_SQL = chargeSumsBy("e.created_at >= $4");

/** Revenue, statements, rows and active agents of `providerId` over `range` and the period before it. */
export async function providerSummary(
  db: Queryable,
  providerId: string,
  range: TimeRange,
): Promise<ProviderSummary> {
  const previousRange = previousPeriod(range);
  const { rows } = await db.query<ChargeSumsRow & { grp: boolean }>(SUMMARY_SQL, [
    providerId,
    previousRange.from,
    range.to,
    range.from,
  ]);
  return {
    current: figuresOf(rows.find((row) => row.grp)),
    previous: figuresOf(rows.find((row) => !row.grp)),
    previousRange,
  };
}

/** Average revenue of a statement, in micro-USDC rounded down; 0 when there were none. */
export function averageCostMicro(figures: ChargeFigures): bigint {
  return figures.statements > 0 ? figures.revenueMicro / BigInt(figures.statements) : 0n;
}

/** The relative change from `previous` to `current` (0.25 is 25 % more); null when there was nothing before. */
export function relativeChange(current: bigint | number, previous: bigint | number): number | null {
  const before = Number(previous);
  if (before === 0) return null;
  return Math.round(((Number(current) - before) / before) * 10_000) / 10_000;
}
