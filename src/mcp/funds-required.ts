import type { Price } from "../billing/cost.js";
import { SqlState } from "../db/sql-state.js";

/** What the agent has with the provider, for the free tools. */
export interface AgentAccount {
  balanceMicro: bigint;
  /** As `SHOW pgtoll.price` gives it (see parsePricePer1000Rows). */
  price: Price;
  depositAddress: string;
}

/**
 * The proxy refused to open a session because the agent cannot pay a row (PT402 at startup): no upstream
 * session was opened. The message carries the proxy's hint (how to fund).
 */
export class FundsRequiredError extends Error {
  override name = "FundsRequiredError";
  readonly code = SqlState.insufficientFunds;
  constructor(
    message: string,
    readonly account: AgentAccount,
  ) {
    super(message);
  }
}
