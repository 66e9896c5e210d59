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
