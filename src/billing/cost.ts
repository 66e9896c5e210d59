/** A provider's price, in integers: micro-USDC per 1000 rows, and the markup multiplier in millionths. */
export interface Price {
  priceMicroPer1000Rows: bigint;
  markupPpm: bigint;
}

const DIVISOR = 1000n * 1_000_000n;

/**
 * The cost rule: rowCount x basePricePer1000Rows / 1000 x markupMultiplier, computed exactly and rounded up
 * to the next micro-USDC. 0 rows cost 0. This is the only implementation; every surface calls it.
 */
export function costOfRows(rowCount: bigint | number, price: Price): bigint {
  const rows = BigInt(rowCount);
  if (rows < 0n) throw new RangeError(`rowCount must not be negative, got ${rows}`);
  const numerator = rows * price.priceMicroPer1000Rows * price.markupPpm;
  return (numerator + DIVISOR - 1n) / DIVISOR;
}

/**
 * The largest row count whose cost fits in `budgetMicro`: the proxy uses it to know how many rows a
 * reservation pays for before it must grow.
 */
export function rowsAffordable(budgetMicro: bigint, price: Price): bigint {
  const perRowScaled = price.priceMicroPer1000Rows * price.markupPpm;
  if (perRowScaled === 0n) return BigInt(Number.MAX_SAFE_INTEGER);
  if (budgetMicro <= 0n) return 0n;
  return (budgetMicro * DIVISOR) / perRowScaled;
}
