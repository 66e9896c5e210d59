/** A provider's two pricing numbers as it sets them: micro-USDC per 1000 rows, and the markup in millionths. */
export interface PriceSettings {
  priceMicroPer1000Rows: bigint;
  markupPpm: bigint;
}

/**
 * What the cost rule charges: USDC per 1000 rows with the markup applied, in pico-USDC (10^-12 USDC). A base
 * price in micro-USDC times a markup in millionths is a whole number of pico-USDC, so every price a provider can
 * set is exact in this unit, and so is every price `SHOW pgtoll.price` prints.
 */
export interface Price {
  picoUsdcPer1000Rows: bigint;
}

const PICO_PER_MICRO = 1_000_000n;
const PICO_PER_USDC = 1_000_000_000_000n;
/** Pico-USDC per 1000 rows to micro-USDC per row. */
const DIVISOR = 1000n * PICO_PER_MICRO;

/** The price a provider's settings stand for: base price times markup. */
export function priceOf(settings: PriceSettings): Price {
  return { picoUsdcPer1000Rows: settings.priceMicroPer1000Rows * settings.markupPpm };
}

/** Whether the price charges nothing (then no hold is needed and no row is limited). */
export function isFree(price: Price): boolean {
  return price.picoUsdcPer1000Rows === 0n;
}

/**
 * The cost rule: rowCount x basePricePer1000Rows / 1000 x markupMultiplier, computed exactly and rounded up
 * to the next micro-USDC. 0 rows cost 0. This is the only implementation; every surface calls it.
 */
export function costOfRows(rowCount: bigint | number, price: Price): bigint {
  const rows = BigInt(rowCount);
  if (rows < 0n) throw new RangeError(`rowCount must not be negative, got ${rows}`);
  return (rows * price.picoUsdcPer1000Rows + DIVISOR - 1n) / DIVISOR;
}

/**
 * The largest row count whose cost fits in `budgetMicro`: the proxy uses it to know how many rows a
 * reservation pays for before it must grow.
 */
export function rowsAffordable(budgetMicro: bigint, price: Price): bigint {
  if (price.picoUsdcPer1000Rows === 0n) return BigInt(Number.MAX_SAFE_INTEGER);
  if (budgetMicro <= 0n) return 0n;
  return (budgetMicro * DIVISOR) / price.picoUsdcPer1000Rows;
}

/**
 * USDC per 1000 rows as agents read it (`SHOW pgtoll.price`, MCP's `pricePer1000Rows`): exact, with at least 6
 * decimals and at most 12, trailing zeros past the sixth cut.
 */
export function formatPricePer1000Rows(price: Price): string {
  const whole = price.picoUsdcPer1000Rows / PICO_PER_USDC;
  const fraction = (price.picoUsdcPer1000Rows % PICO_PER_USDC)
    .toString()
    .padStart(12, "0")
    .replace(/0{1,6}$/, "");
  return `${whole}.${fraction.padEnd(6, "0")}`;
}

/** The price a {@link formatPricePer1000Rows} text stands for; null for text that is not such a value. */
export function parsePricePer1000Rows(text: string): Price | null {
  const match = /^(\d{1,12})\.(\d{1,12})$/.exec(text.trim());
  if (!match) return null;
  return { picoUsdcPer1000Rows: BigInt(match[1]!) * PICO_PER_USDC + BigInt(match[2]!.padEnd(12, "0")) };
}
