import type { DailyLimit } from "../billing/daily-limits.js";
import { formatMicro } from "../billing/money.js";
import { SqlState } from "../db/sql-state.js";
import { errorFrame, FUNDING_HINT } from "./proxy-errors.js";

/*
 * The errors a metered statement can end with. Each says what was run and what was charged, and the ones about
 * the balance say how to fund it.
 */

/**
 * Nothing available funds a statement (no rows delivered), or the balance ran out mid-result; `ms`: the
 * statement ran that long, its time charged, when the price counts time.
 */
export function insufficientFunds(rowsDelivered: number, ms?: number): Buffer {
  const message =
    ms !== undefined
      ? `insufficient balance: the statement was stopped after ${Math.round(ms)} ms and ${rowsDelivered} rows, what the balance paid for; they were charged`
      : rowsDelivered > 0
        ? `insufficient balance: the result was cut off after ${rowsDelivered} rows, which were charged`
        : "insufficient balance: deposit funds with this provider to run statements";
  return errorFrame(SqlState.insufficientFunds, message, { hint: FUNDING_HINT });
}

/** The ledger could not be reached: nothing was run (or, mid-result, the rows delivered were charged). */
export function ledgerUnavailable(rowsDelivered?: number): Buffer {
  return errorFrame(
    SqlState.cannotConnectNow,
    rowsDelivered === undefined
      ? "the pgtoll ledger is unavailable, so the statement was not run; try again shortly"
      : `the pgtoll ledger is unavailable: the result was cut off after ${rowsDelivered} rows, which were charged; try again shortly`,
  );
}

/**
 * The query ran and its result was delivered, but the ledger could not be reached to write what it cost before its
 * answer ended (`pgtoll.synchronous_charges`): the charge stays queued and is written once the ledger is back.
 */
export function chargeNotWritten(): Buffer {
  return errorFrame(
    SqlState.cannotConnectNow,
    "the pgtoll ledger is unavailable: this query's result stands, but its charge is not written yet (pgtoll keeps trying); try the next query shortly",
  );
}

/**
 * A row larger than pgtoll reads (PGTOLL_MAX_ROW_BYTES): refused from its length word, unread and not charged;
 * the rows before it were delivered and charged.
 */
export function rowTooLarge(maxRowBytes: number, rowsDelivered: number): Buffer {
  return errorFrame(
    SqlState.programLimitExceeded,
    `${ROW_TOO_LARGE_PREFIX} pgtoll's limit of ${maxRowBytes} bytes (PGTOLL_MAX_ROW_BYTES): the result was cut off after ${rowsDelivered} rows, which were charged; the large row was not`,
    {
      hint: "select less of the large value (substring, length), or ask the operator to raise PGTOLL_MAX_ROW_BYTES",
    },
  );
}

/**
 * A query's answer passed the agent's own cap on its size (`pgtoll.max_result_rows`, `pgtoll.max_result_bytes`):
 * the rows before the cap were delivered and charged; the rest is cancelled, unread and not charged.
 */
export function resultTooLarge(
  maxRows: number | null,
  maxBytes: number | null,
  rowsDelivered: number,
): Buffer {
  const caps = [
    maxRows === null ? undefined : `${maxRows} rows (pgtoll.max_result_rows)`,
    maxBytes === null ? undefined : `${maxBytes} bytes of rows (pgtoll.max_result_bytes)`,
  ].filter((cap) => cap !== undefined);
  return errorFrame(
    SqlState.programLimitExceeded,
    `${RESULT_TOO_LARGE_PREFIX} more than ${caps.join(" or ")}: the result was cut off after ${rowsDelivered} rows, which were charged`,
    { hint: "add a LIMIT or select fewer columns, or raise the cap" },
  );
}

/** How the message of {@link resultTooLarge} begins, for the surfaces that read it. */
export const RESULT_TOO_LARGE_PREFIX = "result too large:";

/** How the message of {@link rowTooLarge} begins, for the surfaces that read it. */
export const ROW_TOO_LARGE_PREFIX = "a row of the result is larger than";

/** A write above the provider's bound on rows written per statement: it is rolled back. */
export function writeLimitError(rows: number, limit: number): Buffer {
  return errorFrame(
    SqlState.programLimitExceeded,
    `the statement wrote ${rows} rows, more than the provider allows in one statement (${limit}); it was rolled back and not charged`,
    { hint: "narrow the WHERE clause, or split the write into smaller statements" },
  );
}

/** A write the balance cannot pay for: it is rolled back; only rows it returned to the client were charged. */
export function unpaidWriteError(rows: number): Buffer {
  return errorFrame(
    SqlState.insufficientFunds,
    `insufficient balance: the statement wrote ${rows} rows, which the balance does not pay for; it was rolled back and not charged`,
    {
      hint: "POST /api/deposit credits a USDC transfer to the provider's wallet; then run the write again",
    },
  );
}

/**
 * The agent's own budget for the session (`pgtoll.max_session_cost`) or for each query (`pgtoll.max_query_cost`)
 * stops the statement: before it ran (`rowsDelivered` undefined) or mid-result, its delivered rows charged. Its
 * own SQLSTATE: paying more would not help.
 */
export function budgetError(
  kind: "session" | "query",
  budgetMicro: bigint,
  spentMicro: bigint,
  rowsDelivered?: number,
): Buffer {
  const setting = `pgtoll.max_${kind}_cost`;
  return errorFrame(
    SqlState.budgetExceeded,
    `${setting} of ${formatMicro(budgetMicro)} USDC reached (this ${kind} has spent ${formatMicro(spentMicro)}): ${stoppedStatement(rowsDelivered)}`,
    { hint: `SET ${setting} to a higher value, or RESET it, to go on` },
  );
}

/** The agent's own daily limit with the provider stops the statement (before it ran, or mid-result). */
export function dailyLimitError(limit: DailyLimit, rowsDelivered?: number): Buffer {
  return errorFrame(
    SqlState.budgetExceeded,
    `daily limit of ${formatMicro(limit.dailyLimitMicro ?? 0n)} USDC with this provider reached (${formatMicro(limit.spentTodayMicro)} spent today): ${stoppedStatement(rowsDelivered)}`,
    {
      hint: `it resets at ${limit.resetsAt.toISOString()}; PUT /api/agents/<wallet>/limits/<providerId> raises it`,
    },
  );
}

/** What became of a statement a budget stopped: before it ran, or mid-result. */
function stoppedStatement(rowsDelivered: number | undefined): string {
  return rowsDelivered === undefined
    ? "the statement was not run"
    : `the result was cut off after ${rowsDelivered} rows, which were charged`;
}
