import type { Price } from "./cost.js";
import { numberToMicro } from "./money.js";

/** Bounds of the two pricing numbers; the spec leaves them open, these are documented in docs/payment-gateway.md. */
export const PRICE_LIMITS = {
  maxBasePricePer1000Rows: 1_000_000,
  minMarkupMultiplier: 1,
  maxMarkupMultiplier: 100,
} as const;

export class PricingError extends Error {
  override name = "PricingError";
}

/**
 * Validates the two numbers of a pricing request and converts them to integers.
 * basePricePer1000Rows: 0 to 1,000,000 token units, at most 6 decimals. markupMultiplier: 1 to 100, at most
 * 6 decimals (1.0 means no markup). Throws {@link PricingError} saying which value is wrong.
 */
export function parsePricing(basePricePer1000Rows: unknown, markupMultiplier: unknown): Price {
  if (typeof basePricePer1000Rows !== "number" || !Number.isFinite(basePricePer1000Rows)) {
    throw new PricingError("basePricePer1000Rows must be a finite number");
  }
  if (basePricePer1000Rows < 0 || basePricePer1000Rows > PRICE_LIMITS.maxBasePricePer1000Rows) {
    throw new PricingError(
      `basePricePer1000Rows must be between 0 and ${PRICE_LIMITS.maxBasePricePer1000Rows}`,
    );
  }
  const priceMicroPer1000Rows = numberToMicro(basePricePer1000Rows);
  if (priceMicroPer1000Rows === null)
    throw new PricingError("basePricePer1000Rows must have at most 6 decimals");
  if (typeof markupMultiplier !== "number" || !Number.isFinite(markupMultiplier)) {
    throw new PricingError("markupMultiplier must be a finite number");
  }
  if (
    markupMultiplier < PRICE_LIMITS.minMarkupMultiplier ||
    markupMultiplier > PRICE_LIMITS.maxMarkupMultiplier
  ) {
    throw new PricingError(
      `markupMultiplier must be between ${PRICE_LIMITS.minMarkupMultiplier} and ${PRICE_LIMITS.maxMarkupMultiplier}`,
    );
  }
  const markupPpm = numberToMicro(markupMultiplier);
  if (markupPpm === null) throw new PricingError("markupMultiplier must have at most 6 decimals");
  return { priceMicroPer1000Rows, markupPpm };
}
