import { costBreakdown, type Price, priceForRelations, priceOf, statementCost } from "../src/billing/cost.js";
import { formatMicro, microToNumber } from "../src/billing/money.js";
import { parsePriceDimensions, parsePricing } from "../src/billing/pricing.js";
import { benchPricing } from "./metered-agent.js";

/** The table every pgbench read reads: the priced provider sets it a price of its own, above the base price. */
export const PRICED_TABLE = "pgbench_accounts";

/**
 * The pricing of the `pgtoll-priced` target's provider, as `POST /api/providers/:id/pricing` takes it: the rows-only
 * provider's base price and markup, plus every other dimension. Each is a multiple of the base price, rounded up to
 * the micro-USDC, so that `PGTOLL_BENCH_PRICE` scales the whole schedule and the minimum stays between a point
 * read's parts and a 100-row read's. At the default 0.1 USDC per 1000 rows: a minimum of 0.0003 USDC per
 * statement, 0.5 USDC per MB, 0.01 USDC per second and `pgbench_accounts` at 0.11 USDC per 1000 rows.
 */
export function pricedBenchPricing(basePricePer1000Rows: number) {
  const rowsOnly = benchPricing(basePricePer1000Rows);
  const base = parsePricing(rowsOnly.basePricePer1000Rows, rowsOnly.markupMultiplier).priceMicroPer1000Rows;
  const times = (numerator: bigint, denominator: bigint) =>
    microToNumber((base * numerator + denominator - 1n) / denominator);
  return {
    ...rowsOnly,
    minimumCostPerStatement: times(3n, 1000n),
    pricePerMB: times(5n, 1n),
    pricePerSecond: times(1n, 10n),
    tablePrices: { [PRICED_TABLE]: times(11n, 10n) },
  };
}

export type PricedBenchPricing = ReturnType<typeof pricedBenchPricing>;

/** The price the gateway makes of a pricing request, with the same parsing (table names are plain here). */
function priceOfRequest(pricing: ReturnType<typeof benchPricing> & Record<string, unknown>): Price {
  return priceOf({
    ...parsePricing(pricing.basePricePer1000Rows, pricing.markupMultiplier),
    ...parsePriceDimensions(pricing, (name) => name),
  });
}

/**
 * What one statement of each priced cell uses, nominally: pgbench's rows in text format are 2 bytes of field count
 * plus 4 of length per field plus the text (`abalance` is 0 until the write mix runs, `aid` mostly 6 digits), and
 * a statement runs for about a millisecond (statement time is charged per started millisecond).
 */
const NOMINAL_USAGE = [
  { statement: "point read", rows: 1, bytes: 2 + 4 + 1, ms: 1 },
  { statement: "100-row read", rows: 100, bytes: 100 * (2 + 4 + 6 + 4 + 1), ms: 1 },
  { statement: "1000-row read", rows: 1000, bytes: 1000 * (2 + 4 + 6 + 4 + 1), ms: 2 },
] as const;

/** A statement's cost at both providers, in USDC text, by the one cost rule. */
export interface NominalCost {
  statement: string;
  usage: { rows: number; bytes: number; ms: number };
  rowsOnlyUsdc: string;
  pricedUsdc: string;
  /** The priced provider's minimum is what the statement costs there. */
  minimumApplied: boolean;
}

/**
 * What a point read, a 100-row read and a 1000-row read cost at the rows-only provider and at the priced one, by
 * `costBreakdown` (src/billing/cost.ts): the priced side moves more money per statement, so its holds top up and
 * its windows reach their cost bound sooner, which the ratio includes.
 */
export function nominalCosts(basePricePer1000Rows: number): NominalCost[] {
  const rowsOnly = priceOfRequest(benchPricing(basePricePer1000Rows));
  const priced = priceForRelations(priceOfRequest(pricedBenchPricing(basePricePer1000Rows)), [PRICED_TABLE]);
  return NOMINAL_USAGE.map(({ statement, ...usage }) => {
    const breakdown = costBreakdown(usage, priced);
    return {
      statement,
      usage,
      rowsOnlyUsdc: formatMicro(statementCost(usage, rowsOnly)),
      pricedUsdc: formatMicro(breakdown.costMicro),
      minimumApplied: breakdown.minimumApplied,
    };
  });
}

/**
 * Why the schedule does not do at this base price what bench/README.md says (the minimum for point reads only),
 * or null when it does: at a base price of a few micro-USDC, rounding to the micro-USDC outweighs the multiples.
 */
export function minimumPlacementProblem(costs: NominalCost[]): string | null {
  const wrong = costs.filter((c) => c.minimumApplied !== (c.statement === "point read"));
  if (wrong.length === 0) return null;
  return `the priced provider's minimum ${wrong
    .map((c) => `${c.minimumApplied ? "applies" : "does not apply"} to a ${c.statement}`)
    .join(" and ")} at this PGTOLL_BENCH_PRICE`;
}
