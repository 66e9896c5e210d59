import type { PriceSettings } from "./cost.js";
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
export function parsePricing(basePricePer1000Rows: unknown, markupMultiplier: unknown): PriceSettings {
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

/**
 * What a provider sets about its agents' sessions beside the price, each with its default (used when the
 * provider never set it). They apply to the wire proxy, `POST /api/query` and MCP alike.
 */
export interface AgentLimits {
  /** A statement that writes more rows is rolled back, whatever its WHERE clause says. */
  maxRowsWrittenPerStatement: number;
  /** PostgreSQL's `lock_timeout` for agents: a statement waiting longer for a lock fails. */
  lockTimeoutMs: number;
  /** PostgreSQL's `idle_in_transaction_session_timeout`: an agent idle inside a transaction is disconnected. */
  idleInTransactionTimeoutMs: number;
}

export const DEFAULT_AGENT_LIMITS: Readonly<AgentLimits> = Object.freeze({
  maxRowsWrittenPerStatement: 1000,
  lockTimeoutMs: 5000,
  idleInTransactionTimeoutMs: 30_000,
});

/** Bounds of each limit, inclusive. */
export const AGENT_LIMIT_BOUNDS: Readonly<Record<keyof AgentLimits, readonly [number, number]>> =
  Object.freeze({
    maxRowsWrittenPerStatement: [1, 10_000_000],
    lockTimeoutMs: [1, 600_000],
    idleInTransactionTimeoutMs: [1000, 3_600_000],
  });

/**
 * Validates the limits present in a pricing request (absent ones stay as they are); throws {@link PricingError}
 * naming the field that is wrong.
 */
export function parseAgentLimits(body: Record<string, unknown>): Partial<AgentLimits> {
  const limits: Partial<AgentLimits> = {};
  for (const name of Object.keys(AGENT_LIMIT_BOUNDS) as (keyof AgentLimits)[]) {
    const value = body[name];
    if (value === undefined) continue;
    const [min, max] = AGENT_LIMIT_BOUNDS[name];
    if (typeof value !== "number" || !Number.isInteger(value) || value < min || value > max)
      throw new PricingError(`${name} must be an integer from ${min} to ${max}`);
    limits[name] = value;
  }
  return limits;
}

/** Bounds of the pricing dimensions beyond rows, in USDC (documented in docs/payment-gateway.md). */
export const DIMENSION_LIMITS = {
  maxMinimumCostPerStatement: 1000,
  maxPricePerMB: 1_000_000,
  maxPricePerSecond: 1_000_000,
  maxTablePrices: 1000,
} as const;

/** One USDC amount of a pricing request: a number from 0 to `max`, at most 6 decimals. */
function usdcField(name: string, value: unknown, max: number): bigint {
  if (typeof value !== "number" || !Number.isFinite(value))
    throw new PricingError(`${name} must be a finite number`);
  if (value < 0 || value > max) throw new PricingError(`${name} must be between 0 and ${max}`);
  const micro = numberToMicro(value);
  if (micro === null) throw new PricingError(`${name} must have at most 6 decimals`);
  return micro;
}

/**
 * Validates the optional dimensions of a pricing request (absent ones stay as they are) and converts them to
 * integers: `minimumCostPerStatement`, `pricePerMB`, `pricePerSecond` (USDC) and `tablePrices` (an object of
 * `table` or `schema.table` to a basePricePer1000Rows, each name read by `parseTableName`). Throws
 * {@link PricingError} naming the field that is wrong.
 */
export function parsePriceDimensions(
  body: Record<string, unknown>,
  parseTableName: (text: string) => string | null,
): Omit<Partial<PriceSettings>, "priceMicroPer1000Rows" | "markupPpm"> {
  const dimensions: Omit<Partial<PriceSettings>, "priceMicroPer1000Rows" | "markupPpm"> = {};
  if (body.minimumCostPerStatement !== undefined)
    dimensions.minimumMicroPerStatement = usdcField(
      "minimumCostPerStatement",
      body.minimumCostPerStatement,
      DIMENSION_LIMITS.maxMinimumCostPerStatement,
    );
  if (body.pricePerMB !== undefined)
    dimensions.priceMicroPerMB = usdcField("pricePerMB", body.pricePerMB, DIMENSION_LIMITS.maxPricePerMB);
  if (body.pricePerSecond !== undefined)
    dimensions.priceMicroPerSecond = usdcField(
      "pricePerSecond",
      body.pricePerSecond,
      DIMENSION_LIMITS.maxPricePerSecond,
    );
  const tables = body.tablePrices;
  if (tables !== undefined) {
    if (typeof tables !== "object" || tables === null || Array.isArray(tables))
      throw new PricingError('tablePrices must be an object such as {"airports": 0.5, "public.routes": 1}');
    const entries = Object.entries(tables);
    if (entries.length > DIMENSION_LIMITS.maxTablePrices)
      throw new PricingError(`tablePrices may name at most ${DIMENSION_LIMITS.maxTablePrices} tables`);
    const prices = new Map<string, bigint>();
    for (const [text, value] of entries) {
      const key = parseTableName(text);
      if (key === null)
        throw new PricingError(`tablePrices: ${JSON.stringify(text)} is not a table name ([schema.]table)`);
      if (prices.has(key)) throw new PricingError(`tablePrices names ${JSON.stringify(key)} twice`);
      prices.set(
        key,
        usdcField(`tablePrices[${JSON.stringify(text)}]`, value, PRICE_LIMITS.maxBasePricePer1000Rows),
      );
    }
    dimensions.tablePricesMicroPer1000Rows = prices;
  }
  return dimensions;
}
