import { formatPricePer1000Rows, type Price, parsePricePer1000Rows } from "../billing/cost.js";
import { formatMicro, parseMicro } from "../billing/money.js";
import { SqlState } from "../db/sql-state.js";

import { FUNDING_HINT, StartupRefusal } from "./proxy-errors.js";
import type { AgentFunding } from "./session-funding.js";

/**
 * The FATAL PT402 a session of an agent that cannot pay a row gets at startup, before any upstream session is
 * opened. It says what is available, what is needed, the price and the provider's wallet, so an agent with
 * psql knows where to send USDC, and the stdio MCP server reads them back ({@link readFundsRefusal}) to answer
 * its free tools without a session.
 */
export function fundsRefusal(
  providerId: string,
  funding: AgentFunding,
  price: Price,
  depositAddress: string,
): StartupRefusal {
  return new StartupRefusal(
    SqlState.insufficientFunds,
    `insufficient funds: ${formatMicro(funding.availableMicro)} USDC available with provider ${providerId}; ` +
      `a session needs at least ${formatMicro(funding.neededMicro)} USDC (one row at ` +
      `${formatPricePer1000Rows(price)} USDC per 1000 rows)`,
    "insufficient_funds",
    `fund it first: the provider's wallet is ${depositAddress}. ${FUNDING_HINT}`,
  );
}

/** What a refusal from {@link fundsRefusal} says; null for any other error. */
export interface RefusedAccount {
  availableMicro: bigint;
  /** As `SHOW pgtoll.price` gives it (see parsePricePer1000Rows). */
  price: Price;
  depositAddress: string;
}

export function readFundsRefusal(error: unknown): RefusedAccount | null {
  const { code, message, hint } = (error ?? {}) as { code?: unknown; message?: unknown; hint?: unknown };
  if (code !== SqlState.insufficientFunds || typeof message !== "string" || typeof hint !== "string")
    return null;
  const available = /^insufficient funds: (\d+\.\d{6}) USDC available/.exec(message)?.[1];
  const price = /one row at (\d+\.\d+) USDC per 1000 rows/.exec(message)?.[1];
  const wallet = /the provider's wallet is (0x[0-9a-fA-F]{40})\./.exec(hint)?.[1];
  const availableMicro = available ? parseMicro(available) : null;
  const parsedPrice = price ? parsePricePer1000Rows(price) : null;
  if (availableMicro === null || !parsedPrice || !wallet) return null;
  return { availableMicro, price: parsedPrice, depositAddress: wallet };
}
