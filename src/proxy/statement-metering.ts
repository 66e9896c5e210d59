import type { Logger } from "pino";
import type { RefusalKind } from "../analytics/refusal-tally.js";
import { isLedgerUnavailable } from "../billing/ledger-availability.js";
import { withholdsDatabaseText } from "../billing/priced-text.js";
import type { GuardedStatement } from "../guard/index.js";
import { DEFAULT_MAX_ROW_BYTES } from "../providers/message-gate.js";
import { boundedNotice, pricedTableNotice, withheldError } from "./database-notices.js";
import { lastCostText } from "./last-cost-text.js";
import {
  budgetError,
  chargeNotWritten,
  dailyLimitError,
  insufficientFunds,
  ledgerUnavailable,
  resultTooLarge,
  rowTooLarge,
  unpaidWriteError,
  writeLimitError,
} from "./metering-errors.js";
import { encodeParameterStatus } from "./serializer.js";
import type { SessionMeter, Shortfall } from "./session-meter.js";

/**
 * What the metering asks of the session's meter: whether a statement may start, how many rows the hold pays
 * for, and each statement's end (its rows charged, a write paid for or not). How holds grow and charges are
 * written is the meter's (session-meter.ts).
 */
export type RelayMeter = Pick<
  SessionMeter,
  | "canStart"
  | "statementRows"
  | "allowRows"
  | "topUp"
  | "endStatement"
  | "endWrite"
  | "settleWrites"
  | "synchronousCharges"
  | "writeCharges"
  | "releaseIfIdle"
  | "budgetStops"
  | "shortfall"
  | "priceStatement"
  | "pricesTables"
  | "pricesTime"
  | "timeLeftMs"
  | "fundTime"
  | "stoppingBudget"
  | "queryAnswered"
  | "maxResultRows"
  | "maxResultBytes"
  | "servesRest"
  | "lastQueryCost"
>;

/**
 * Why a result ends before its last row: the balance does not pay for the next one, the agent's daily limit or
 * a budget (`pgtoll.max_session_cost`, `pgtoll.max_query_cost`) stops it, or the ledger is out of reach.
 */
export type CutOffReason =
  | "unfunded"
  | "daily-limit"
  | "budget"
  | "ledger-unavailable"
  | "row-too-large"
  | "result-too-large";

/**
 * The money side of a statement's path through the relay, as events the relay reports in the order the upstream
 * answers, and decisions it asks for. The relay frames, forwards and orders; everything about what is paid for is
 * here. A call that needs the ledger answers with a promise, which the relay waits for with that direction's
 * socket paused.
 *
 * A statement's life: `startStatement` before it is sent (the relay stamps when it sent it), `allowRows` for each
 * run of its rows (`fundRow` when the hold runs short, `cutOff` when that fails), then one end: `endStatement`,
 * `endWrite`, `failStatement` (its error, or the session's end) or `cutOff`.
 */
export interface StatementMetering {
  /**
   * A message that makes the database parse, plan or run SQL (Query, Parse, Bind, Execute) is to be sent: undefined
   * when it may go at once. Otherwise it waits for the promise: undefined then too, or the ErrorResponse that
   * refuses it in its place (nothing is run unfunded).
   */
  startStatement(): Promise<Buffer | undefined> | undefined;
  /**
   * The running statement's next `count` rows (DataRow, or CopyData of a COPY), `bytes` their payloads in all:
   * how many of them, from the first, are paid for and may be relayed (counted). Called per run of rows read in
   * one chunk: it must not allocate. Rows it does not allow come back one by one, with `fundRow`.
   */
  allowRows(count: number, bytes: number): number;
  /**
   * One row (`bytes` its payload) the hold does not pay for: tops the hold up. Resolves to undefined when the row
   * is paid for (counted), else to why the result is cut off.
   */
  fundRow(bytes: number): Promise<CutOffReason | undefined>;
  /**
   * Ends the running statement cut off: charges the rows it delivered and resolves to the ErrorResponse the client
   * gets in place of the rest (the relay cancels the rest upstream).
   */
  cutOff(sql: string, reason: CutOffReason, ms?: number): Promise<Buffer>;
  /**
   * A statement that wrote nothing completed (its CommandComplete at `complete[at]`), having taken `ms` on the
   * provider's database when the relay measured it: charges it. `continued`: a later batch of a portal an earlier
   * Execute left suspended (its statement's minimum was charged with the first). `shape`: the guard's literal shape
   * of `sql`, when it has one. A promise when the session must wait for
   * earlier charges to be written; a reason when the completion itself is not paid for (a MOVE, charged as one row).
   */
  endStatement(
    sql: string,
    complete: Buffer,
    at: number,
    ms: number | undefined,
    continued?: boolean,
    shape?: string,
  ): Promise<void> | CutOffReason | undefined;
  /**
   * A write completed, uncommitted, having written `written` rows: true when it is paid for (and charged), so the
   * relay lets it commit; otherwise the ErrorResponse the client gets while the relay rolls it back. `wrapped`:
   * it commits only with the transaction the proxy opened around its query, which `settleWrites` reports.
   */
  endWrite(
    written: number,
    sql: string,
    ms: number | undefined,
    wrapped?: boolean,
  ): true | Buffer | Promise<true | Buffer>;
  /**
   * The transaction the proxy opened around a query's writes committed, or was rolled back (pgtoll undid it, or
   * the session ended before its COMMIT): the writes are charged, or not at all.
   */
  settleWrites(committed: boolean): Promise<void> | undefined;
  /**
   * The time bound: milliseconds more the running statement, `elapsedMs` into its time on the database, may take
   * before what is held for it (less its rows, bytes and minimum so far) or the session's budget stops paying.
   */
  timeLeftMs(elapsedMs: number): number;
  /**
   * The running statement, `elapsedMs` into its time, has used what was held for it: tops the hold up. Resolves to
   * undefined when it may go on, else to why it is cut off.
   */
  fundTime(elapsedMs: number): Promise<CutOffReason | undefined>;
  /** The price has table prices: the relay names each statement before its rows and end (`priceStatement`). */
  readonly pricesTables: boolean;
  /** The price counts statement time: the relay measures each statement's (its `ms`). */
  readonly pricesTime: boolean;
  /** Largest row relayed, in bytes of its payload (PGTOLL_MAX_ROW_BYTES): a larger one cuts the result off. */
  readonly maxRowBytes: number;
  /** The statement being answered (undefined when the relay does not know it): its rows are charged at its price. */
  priceStatement(statement: GuardedStatement | undefined): void;
  /**
   * The running statement failed, or the session ends in its middle: the rows it delivered and its time (`ms`,
   * when the price counts time) are charged. A promise when the charge waits for the ledger (its time took it
   * past the hold).
   */
  failStatement(sql: string, ms?: number): Promise<void> | undefined;
  /**
   * The database's ErrorResponse ending the running statement (`statement`, undefined when the relay does not know
   * it), as the client gets it: its text bounded and charged as a row, or withheld when the balance cannot pay
   * for that row, or when the statement reads a priced table (billing/priced-text.ts). The statement then ends
   * with `failStatement`.
   */
  errorOf(buffer: Buffer, start: number, end: number, statement?: GuardedStatement): Buffer | Promise<Buffer>;
  /**
   * The error of a COMMIT the proxy sent for a wrapped write (of `statements`), charged as a row at once if the
   * hold pays for it; its text withheld when one of them reads a priced table.
   */
  commitErrorOf(buffer: Buffer, start: number, end: number, statements?: readonly GuardedStatement[]): Buffer;
  /**
   * A NoticeResponse, bounded: within a statement (`inStatement`, `statement` when the relay knows it) charged as
   * a row, its text withheld when the statement reads a priced table, and dropped (undefined) when the hold does
   * not pay for it; between statements (the server's own) free.
   */
  noticeOf(
    buffer: Buffer,
    start: number,
    end: number,
    inStatement: boolean,
    statement?: GuardedStatement,
  ): Buffer | undefined;
  /**
   * A query is answered (its ReadyForQuery is next): the next statement begins the next query, for
   * `pgtoll.max_query_cost`. With `pgtoll.synchronous_charges` on, what its statements cost is written to the
   * ledger first: a promise the ReadyForQuery waits for, resolving to undefined once the charge is written, or to
   * the ErrorResponse that says the ledger is out of reach (the result stands; the charge is written later).
   * Undefined when the answer need not wait. `more`: the client's next queries are already waiting for their
   * answers (it pipelines), so their charges are expected right after this one's.
   */
  queryAnswered(more?: boolean): Promise<Buffer | undefined> | undefined;
  /**
   * After `queryAnswered`, for a session that serves REST: the `pgtoll.last_query_cost` ParameterStatus that
   * goes before the query's ReadyForQuery, so that its cost comes with its answer.
   */
  queryCostReport(): Buffer | undefined;
  /**
   * The unspent hold goes back to the agent's balance if the session is idle (`isIdle`, asked once a top-up in
   * flight has landed: see `SessionMeter.releaseIfIdle`). Undefined when it is busy or holds nothing to give.
   */
  releaseIfIdle(isIdle: () => boolean): Promise<void> | undefined;
}

export interface StatementMeteringOptions {
  meter: RelayMeter;
  /** Most rows one statement may write (the provider's `maxRowsWrittenPerStatement`); more is rolled back. */
  maxRowsWritten: number;
  logger: Logger;
  /** Counts a refused statement of this session's provider (analytics/refusal-tally.ts). */
  countRefusal(kind: RefusalKind, rule: string): void;
  /** Largest row relayed, in bytes (PGTOLL_MAX_ROW_BYTES); default {@link DEFAULT_MAX_ROW_BYTES}. */
  maxRowBytes?: number;
}

/** Statements metered by rows, from the session's hold. */
export function statementMetering(options: StatementMeteringOptions): StatementMetering {
  return new RowMetering(options);
}

class RowMetering implements StatementMetering {
  readonly #meter: RelayMeter;
  readonly pricesTables: boolean;
  readonly pricesTime: boolean;
  readonly maxRowBytes: number;
  /** The daily limit that cut the running statement off, for its error. */
  #limit: Shortfall | undefined;

  constructor(private readonly options: StatementMeteringOptions) {
    this.#meter = options.meter;
    this.pricesTables = options.meter.pricesTables;
    this.pricesTime = options.meter.pricesTime;
    this.maxRowBytes = options.maxRowBytes ?? DEFAULT_MAX_ROW_BYTES;
  }

  priceStatement(statement: GuardedStatement | undefined): void {
    this.#meter.priceStatement(statement ? statement.relations : undefined);
  }

  startStatement(): Promise<Buffer | undefined> | undefined {
    if (this.#meter.canStart) return undefined;
    if (this.#meter.budgetStops(0)) return Promise.resolve(this.#budgetError());
    return this.#meter.topUp(1).then(
      async (ok) => {
        if (ok) return undefined;
        const short = await this.#meter.shortfall(1);
        if (short.kind === "daily-limit") {
          this.options.countRefusal("funds", "daily-limit");
          return dailyLimitError(short.limit);
        }
        this.options.countRefusal("funds", "insufficient-balance");
        return insufficientFunds(0);
      },
      (error: unknown) => {
        // The session stays usable for when the ledger is back; any other failure is the session's end.
        if (!isLedgerUnavailable(error)) throw error;
        this.options.logger.warn({ err: error }, "the ledger is unavailable: statement refused");
        return ledgerUnavailable();
      },
    );
  }

  allowRows(count: number, bytes: number): number {
    const meter = this.#meter;
    if (meter.maxResultRows === null && meter.maxResultBytes === null) return meter.allowRows(count, bytes);
    // A run that would pass a cap comes one row at a time (`fundRow`), where the cap is checked per row.
    if (this.#passesResultCap(count, bytes)) return 0;
    const allowed = meter.allowRows(count, bytes);
    this.#queryRows += allowed;
    this.#queryBytes += allowed === count ? bytes : Math.ceil((bytes * allowed) / count);
    return allowed;
  }

  /** The running query's rows and bytes of row values so far, for `pgtoll.max_result_rows` and `_bytes`. */
  #queryRows = 0;
  #queryBytes = 0;

  #passesResultCap(count: number, bytes: number): boolean {
    const { maxResultRows, maxResultBytes } = this.#meter;
    return (
      (maxResultRows !== null && this.#queryRows + count > maxResultRows) ||
      (maxResultBytes !== null && this.#queryBytes + bytes > maxResultBytes)
    );
  }

  fundRow(bytes: number): Promise<CutOffReason | undefined> {
    if (this.#passesResultCap(1, bytes)) return Promise.resolve("result-too-large");
    if (this.#meter.maxResultRows !== null || this.#meter.maxResultBytes !== null) {
      // Counted now: allowRows below (or a top-up) lets the row through.
      this.#queryRows += 1;
      this.#queryBytes += bytes;
    }
    if (this.#meter.budgetStops(1, bytes)) return Promise.resolve("budget");
    return this.#meter.topUp(1, bytes).then(async (ok) => {
      if (ok && this.#meter.allowRows(1, bytes) === 1) return undefined;
      const short = await this.#meter.shortfall(1, bytes);
      if (short.kind === "daily-limit") this.#limit = short;
      return short.kind;
    }, this.#cutOffWhileLedgerUnavailable("result cut off"));
  }

  /**
   * The error of a statement a budget stops (before it ran, or after `delivered` rows): the session's or the
   * query's, whichever has less left; counted as a refusal of that budget.
   */
  #budgetError(delivered?: number): Buffer {
    const budget = this.#meter.stoppingBudget;
    const kind = budget?.kind ?? "session";
    this.options.countRefusal("funds", `${kind}-budget`);
    return budgetError(kind, budget?.budgetMicro ?? 0n, budget?.spentMicro ?? 0n, delivered);
  }

  /** A ledger out of reach cuts the statement off (the session stays usable); any other failure ends the session. */
  #cutOffWhileLedgerUnavailable(what: string): (error: unknown) => CutOffReason {
    return (error) => {
      if (!isLedgerUnavailable(error)) throw error;
      this.options.logger.warn({ err: error }, `the ledger is unavailable: ${what}`);
      return "ledger-unavailable";
    };
  }

  timeLeftMs(elapsedMs: number): number {
    return this.#meter.timeLeftMs(elapsedMs);
  }

  fundTime(elapsedMs: number): Promise<CutOffReason | undefined> {
    return this.#meter.fundTime(elapsedMs).then((short) => {
      if (!short) return undefined;
      if (short.kind === "daily-limit") this.#limit = short;
      return short.kind;
    }, this.#cutOffWhileLedgerUnavailable("statement cut off"));
  }

  async cutOff(sql: string, reason: CutOffReason, ms?: number): Promise<Buffer> {
    const delivered = this.#meter.statementRows;
    await this.#meter.endStatement(delivered, sql, "cutOff", { ms });
    if (reason === "ledger-unavailable") return ledgerUnavailable(delivered);
    if (reason === "row-too-large") return rowTooLarge(this.maxRowBytes, delivered);
    if (reason === "result-too-large")
      return resultTooLarge(this.#meter.maxResultRows, this.#meter.maxResultBytes, this.#queryRows);
    if (reason === "budget") return this.#budgetError(delivered);
    const limit = this.#limit;
    this.#limit = undefined;
    if (reason === "daily-limit" && limit?.kind === "daily-limit") {
      this.options.countRefusal("funds", "daily-limit");
      return dailyLimitError(limit.limit, delivered);
    }
    this.options.countRefusal("funds", "balance-cut-off");
    // With a time price the statement's time is part of what stopped it, and of what was charged.
    return insufficientFunds(delivered, this.pricesTime ? ms : undefined);
  }

  endStatement(
    sql: string,
    complete: Buffer,
    at: number,
    ms: number | undefined,
    continued = false,
    shape?: string,
  ): Promise<void> | CutOffReason | undefined {
    const rows = this.#meter.statementRows;
    const time = ms === undefined && !continued ? undefined : { ms, continued };
    // MOVE answers a count: it is charged as one row.
    if (rows === 0 && isMoveTag(complete, at)) {
      if (this.#meter.allowRows(1, 0) === 0) return "unfunded";
      return this.#meter.endStatement(1, sql, undefined, time, shape);
    }
    // The charge is queued (group commit); the session waits only at the cost bound (session-meter.ts).
    return this.#meter.endStatement(rows, sql, undefined, time, shape);
  }

  /**
   * Charged if the balance pays for its rows (its count, or its RETURNING rows if more) and it wrote no more than
   * the provider allows. When it is not, only the RETURNING rows the client already received are charged.
   */
  endWrite(
    written: number,
    sql: string,
    ms: number | undefined,
    wrapped = false,
  ): true | Buffer | Promise<true | Buffer> {
    const delivered = this.#meter.statementRows;
    const rows = written > delivered ? written : delivered;
    if (rows > this.options.maxRowsWritten) {
      this.#fail(delivered, sql, ms);
      return writeLimitError(rows, this.options.maxRowsWritten);
    }
    // A write cannot be cut short: one its session's budget does not pay for is rolled back whole.
    if (this.#meter.budgetStops(rows - delivered)) {
      this.#fail(delivered, sql, ms);
      return this.#budgetError();
    }
    const paid = this.#meter.endWrite(rows, delivered, sql, ms === undefined ? undefined : { ms }, wrapped);
    if (paid === true) return true;
    return paid.then(
      (ok) => ok || unpaidWriteError(rows),
      (error: unknown) => {
        if (!isLedgerUnavailable(error)) throw error;
        this.options.logger.warn({ err: error }, "the ledger is unavailable: write rolled back");
        this.#fail(delivered, sql);
        return ledgerUnavailable();
      },
    );
  }

  settleWrites(committed: boolean): Promise<void> | undefined {
    return this.#meter.settleWrites(committed);
  }

  failStatement(sql: string, ms?: number): Promise<void> | undefined {
    return this.#fail(this.#meter.statementRows, sql, ms);
  }

  #fail(delivered: number, sql: string, ms?: number): Promise<void> | undefined {
    // Its time is the database's, whether it ended in a result or an error (a timeout, a cancel).
    if (ms !== undefined && ms > 0) return this.#meter.endStatement(delivered, sql, "failed", { ms });
    if (delivered > 0) return this.#meter.endStatement(delivered, sql, "failed");
    return undefined;
  }

  errorOf(
    buffer: Buffer,
    start: number,
    end: number,
    statement?: GuardedStatement,
  ): Buffer | Promise<Buffer> {
    const relayed = withholdsDatabaseText(statement, this.pricesTables) ? pricedTableNotice : boundedNotice;
    if (this.#meter.allowRows(1) === 1) return relayed(buffer, start, end);
    return this.#meter.topUp(1).then(
      (ok) =>
        ok && this.#meter.allowRows(1) === 1
          ? relayed(buffer, start, end)
          : withheldError(buffer, start, end),
      (error: unknown) => {
        if (!isLedgerUnavailable(error)) throw error;
        return withheldError(buffer, start, end);
      },
    );
  }

  commitErrorOf(
    buffer: Buffer,
    start: number,
    end: number,
    statements: readonly GuardedStatement[] = [],
  ): Buffer {
    if (this.#meter.allowRows(1) !== 1) return withheldError(buffer, start, end);
    // No statement is running: the error's row is charged as one of its own.
    void this.#meter.endStatement(this.#meter.statementRows, "COMMIT", "failed");
    const priced = statements.some((statement) => withholdsDatabaseText(statement, this.pricesTables));
    return priced ? pricedTableNotice(buffer, start, end) : boundedNotice(buffer, start, end);
  }

  noticeOf(
    buffer: Buffer,
    start: number,
    end: number,
    inStatement: boolean,
    statement?: GuardedStatement,
  ): Buffer | undefined {
    if (!inStatement) return boundedNotice(buffer, start, end);
    if (this.#meter.allowRows(1) === 0) return undefined;
    return withholdsDatabaseText(statement, this.pricesTables)
      ? pricedTableNotice(buffer, start, end)
      : boundedNotice(buffer, start, end);
  }

  queryAnswered(more = false): Promise<Buffer | undefined> | undefined {
    this.#meter.queryAnswered(more);
    this.#queryRows = 0;
    this.#queryBytes = 0;
    if (!this.#meter.synchronousCharges) return undefined;
    return this.#meter
      .writeCharges()
      ?.then((outcome) => (outcome === "unavailable" ? chargeNotWritten() : undefined));
  }

  queryCostReport(): Buffer | undefined {
    if (!this.#meter.servesRest) return undefined;
    return encodeParameterStatus("pgtoll.last_query_cost", lastCostText(this.#meter.lastQueryCost));
  }

  releaseIfIdle(isIdle: () => boolean): Promise<void> | undefined {
    return this.#meter.releaseIfIdle(isIdle);
  }
}

/** Whether the CommandComplete frame at `at` is a MOVE's ("MOVE n"). */
function isMoveTag(buffer: Buffer, at: number): boolean {
  // M O V E
  return (
    buffer[at + 5] === 0x4d && buffer[at + 6] === 0x4f && buffer[at + 7] === 0x56 && buffer[at + 8] === 0x45
  );
}
