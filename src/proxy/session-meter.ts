import { randomUUID } from "node:crypto";
import { AgentHold, type HeldCharge } from "../billing/agent-hold.js";
import { ChargeWindow, type StatementOutcome } from "../billing/charge-window.js";
import type { ChargeWriter } from "../billing/charge-writer.js";
import {
  type CostBreakdown,
  costBreakdown,
  costOfRows,
  isFree,
  isRowsOnly,
  msAffordable,
  type Price,
  priceForRelations,
  rowsAffordable,
  statementCost,
} from "../billing/cost.js";
import type { LimitWatch } from "../billing/daily-limit-watch.js";
import { type DailyLimit, dailyLimitRefusing, getDailyLimit } from "../billing/daily-limits.js";
import { type Deferred, deferred } from "../billing/deferred.js";
import type { Queryable } from "../billing/ledger.js";
import { addCosts, NO_COST, type RequestCost } from "../billing/request-cost.js";
import type { WindowClock } from "../billing/window-clock.js";
import type { StatementShapes } from "../guard/statement-shape.js";

export interface MeterOptions {
  /** Rows' worth of funds a session holds at first; the hold doubles at each top-up while the session spends. */
  reserveRows: number;
  /**
   * Most rows' worth one session may hold. Above `reserveRows` a hold also takes at most a quarter of the agent's
   * available balance, so one busy session leaves funds for the agent's others.
   */
  maxReserveRows: number;
  reservationTtlSeconds: number;
  /**
   * Closes the session's open window at the process's next tick, with every other session's (the longest a charge
   * waits in a window before it is written as one entry is the clock's interval).
   */
  clock: WindowClock;
  /**
   * Cost (micro-USDC) of the open window at which it is closed at once. Warning: this bounds what a crash of
   * pgtoll can leave uncharged per open session (to the agent's benefit; never an overcharge).
   */
  windowMaxCostMicro: bigint;
  /** Named in every entry the session writes. */
  sessionId: string;
  /** Fingerprints statements for the per-shape breakdown of an entry; shared by all sessions of a proxy. */
  shapes: StatementShapes;
  /** Tells the session's hold when the agent's daily limit with the provider changes (in any process). */
  limits?: LimitWatch;
  /**
   * When the agent's available balance falls short of a top-up: has the agent's idle sessions in this process give
   * their holds back (`IdleHolds.reclaim`), and the promise of those releases, after which the top-up tries again.
   */
  reclaimIdleHolds?: () => Promise<unknown> | undefined;
  /** Called for every statement's charge, for metrics. */
  onCharge?: (costMicro: bigint) => void;
  /** Called for every window that closes with a charge: its statements, rows and cost, for metrics. */
  onWindowClosed?: (statements: number, rows: number, costMicro: bigint) => void;
  /**
   * `query`: the session runs REST's queries (an in-process session of pgtoll's REST surface). Each query is its
   * own window, closed at its ReadyForQuery rather than by the clock, and written as REST writes a query: one entry
   * with its SQL and row count. A query that reaches `windowMaxCostMicro` is written in more than one entry.
   * With synchronous charges, a query that leaves the session idle gives the hold back with its charge (one
   * ledger statement): as a REST request, it holds nothing once answered. Default `window`: the wire's windows.
   */
  entries?: "window" | "query";
}

/** The least statement time a hold grown for time pays for ahead: fewer ledger round trips for a long statement. */
const MIN_TIME_AHEAD_MS = 250;

/** Distinct texts a window keeps before it is closed early (simple-protocol clients inline their values). */
const MAX_WINDOW_TEXTS = 2000;

/** What a statement used beyond its rows: its result bytes come from `allowRows`, its time from its end. */
export interface StatementTime {
  /** Milliseconds on the provider's database, from sending the statement to its completion. */
  ms?: number;
  /** A later batch of a portal read in several Executes: the statement's minimum was charged with its first. */
  continued?: boolean;
}

/** A write's charge that waits for the commit of the transaction the proxy opened around it. */
interface PendingWrite {
  costMicro: bigint;
  rows: number;
  /** Its RETURNING rows the client received: charged as read even when the write is undone. */
  delivered: number;
  sql: string;
  used: CostBreakdown | null | undefined;
  /** The hold's `limitChanges` when its cost was taken. */
  takenAt?: number;
}

/** What one query's statements were charged, and the sums of their parts. */
export interface QueryCost extends CostBreakdown {
  statements: number;
}

/** Why no more of a statement can be had: the balance, the agent's daily limit, or the session's budget. */
export type Shortfall =
  | { kind: "unfunded" }
  | { kind: "daily-limit"; limit: DailyLimit }
  | { kind: "budget" };

/**
 * The wire proxy's side of two-phase charging for one client session, over the session's {@link AgentHold}
 * (which holds, tops up ahead of need, doubles its size and releases). What the proxy adds:
 *
 * - Rows: a row is forwarded only while the hold still pays for it (`allowRows`); the next part of the hold is
 *   reserved in the background once less than half of its size is left, at the end of a statement or in the
 *   middle of a long result, so in steady state no row waits for the ledger.
 * - Windows: each completed statement's cost, by the cost rule, is taken from the hold at once (`endStatement`)
 *   and added to the session's charge window, which is written as one ledger entry at the clock's next tick (at
 *   most its interval after it opened), when it reaches `windowMaxCostMicro`, or when the session is cut off,
 *   goes idle or ends (`release`, which writes the last window with the release in one statement).
 * - The crash bound: what a session has spent and the ledger has not written (its closed windows still being
 *   written and its open one) is kept under twice `windowMaxCostMicro`. A statement that takes it there makes the
 *   session wait, before its next statement, until enough of its windows are written, however they were closed
 *   (by the bound or by the clock), so a crash leaves at most that, and the statement running, uncharged.
 */
export class SessionMeter {
  readonly #hold: AgentHold;
  readonly #ledger: Queryable;
  readonly #writer: ChargeWriter;
  #statementRows = 0;
  #rowLimit = 0;
  /** Row of the running statement at which the next part of the hold is reserved ahead. */
  #aheadRow = -1;
  /** Costs of small row counts, the common case, so a statement does not redo the bigint arithmetic. */
  readonly #smallCosts: bigint[] = [];
  /** The hold's size `#halfHoldRows` was worked out for. */
  #halfHoldOf = -1n;
  #halfHoldRows = 0;
  readonly #free: boolean;
  /** The price counts rows alone: a row's cost is known without its bytes (the fast path). */
  readonly #rowsOnly: boolean;
  /** The running statement's price: the session's, with the table price of the relations it names. */
  #statementPrice: Price;
  /** Result bytes of the running statement's rows so far. */
  #statementBytes = 0;
  /** `pgtoll.max_session_cost`: what the session's statements may cost in all; null for no budget. */
  #budgetMicro: bigint | null = null;
  /** `pgtoll.max_query_cost`: what the statements of one query may cost; null for no budget. */
  #queryBudgetMicro: bigint | null = null;
  /** What the session had spent when its running query began (`queryAnswered` marks the next one's start). */
  #queryStartMicro = 0n;
  /** The running query's statements charged so far (`lastQueryCost`). */
  #queryStatements = 0;
  /** The sums of their parts, for the statements priced beyond rows (those carry their parts). */
  #queryParts: RequestCost = NO_COST;
  /** The rows, and what they cost, of its statements priced by rows alone (the fast path keeps no parts). */
  #queryRows = 0;
  #queryRowsMicro = 0n;
  /** The last answered query's figures, as taken at its ReadyForQuery: `lastQueryCost` builds them when asked. */
  readonly #lastQuery = { statements: 0, parts: NO_COST, rows: 0, rowsMicro: 0n, costMicro: 0n };
  #lastCost: CostBreakdown | null = null;
  #window: ChargeWindow | null = null;
  #windowsClosed = 0;
  #sessionCostMicro = 0n;
  /** Charges of writes taken from the hold whose transaction has not committed yet (`settleWrites`). */
  #pendingWrites: PendingWrite[] = [];
  /** Twice `windowMaxCostMicro`: what the session may have spent and the ledger not written (`#underCrashBound`). */
  readonly #crashBoundMicro: bigint;
  /** Cost of this session's closed windows that are queued for the ledger and not written yet. */
  #unwrittenMicro = 0n;
  /** The session waits on it while its unwritten spending is at the crash bound (see `#underCrashBound`). */
  #crashBoundWait: Deferred | null = null;
  /** Announced to the charge writer while the session's pipelined queries are being answered (`queryAnswered`). */
  #chargesExpected: (() => void) | undefined;
  /** `pgtoll.synchronous_charges`: each query's answer waits for its charge to be written (`writeCharges`). */
  synchronousCharges = false;
  /**
   * `pgtoll.max_result_rows` and `pgtoll.max_result_bytes`: most rows, and bytes of row values, one query's
   * answer carries; past either the result is cut off, the rows before it charged. Null: no cap of the agent's.
   */
  maxResultRows: number | null = null;
  maxResultBytes: number | null = null;

  constructor(
    ledger: Queryable,
    writer: ChargeWriter,
    readonly agentWallet: string,
    readonly providerId: string,
    readonly price: Price,
    private readonly options: MeterOptions,
  ) {
    this.#free = isFree(price);
    this.#rowsOnly = isRowsOnly(price);
    this.#statementPrice = price;
    const base = costOfRows(options.reserveRows, price);
    this.#ledger = ledger;
    this.#writer = writer;
    this.#crashBoundMicro = 2n * options.windowMaxCostMicro;
    this.#hold = new AgentHold(ledger, writer, agentWallet, providerId, {
      ttlSeconds: options.reservationTtlSeconds,
      baseMicro: base > 0n ? base : 1n,
      maxMicro: costOfRows(Math.max(options.maxReserveRows, options.reserveRows), price),
      onHeldChanged: () => this.#updateLimit(),
      ...(options.limits ? { limits: options.limits } : {}),
      ...(options.reclaimIdleHolds ? { reclaimOtherHolds: options.reclaimIdleHolds } : {}),
      // The rows the running statement delivered are paid from the hold at its end: a new limit leaves them held.
      promised: () => (this.#statementRows === 0 ? 0n : this.#costWith(0, 0)),
    });
    // Nothing is held yet: no row is paid for, unless the provider charges nothing (then none is ever limited).
    this.#updateLimit();
  }

  /**
   * The session holds a reservation it can give back: one whose top-up is not itself waiting for other holds to
   * be given back (`AgentHold.reclaiming`), with no write waiting for its transaction's end (a release would take
   * it for rolled back: `settleWrites`).
   */
  get holdsIdleFunds(): boolean {
    return this.#hold.reservationId !== null && !this.#hold.reclaiming && this.#pendingWrites.length === 0;
  }

  /** Rows of the running statement so far. */
  get statementRows(): number {
    return this.#statementRows;
  }

  /** What this session's statements have cost so far, written or not. */
  get sessionCostMicro(): bigint {
    return this.#sessionCostMicro;
  }

  /** Whether a statement may start: false when nothing is held and nothing could be reserved yet. */
  get canStart(): boolean {
    if (this.#budgeted && !this.#withinBudget(statementCost({ rows: 0 }, this.price))) return false;
    return this.#free || this.#hold.unspent >= this.#costOf(1);
  }

  /** `pgtoll.max_session_cost` in micro-USDC; null when the session has no budget. */
  get budgetMicro(): bigint | null {
    return this.#budgetMicro;
  }

  /**
   * Sets the session's budget (null: none). A budget below what the session already spent stops its next
   * statement; a higher one, or none, lets it go on.
   */
  set budgetMicro(budget: bigint | null) {
    this.#budgetMicro = budget;
    this.#updateLimit();
  }

  /** `pgtoll.max_query_cost` in micro-USDC; null when queries have no budget of their own. */
  get queryBudgetMicro(): bigint | null {
    return this.#queryBudgetMicro;
  }

  /** Sets what each query may cost from its next statement on (null: no per-query budget). */
  set queryBudgetMicro(budget: bigint | null) {
    this.#queryBudgetMicro = budget;
    this.#updateLimit();
  }

  /** What the running query's statements have cost so far. */
  get queryCostMicro(): bigint {
    return this.#sessionCostMicro - this.#queryStartMicro;
  }

  /**
   * A query was answered (its ReadyForQuery): its cost becomes `lastQueryCost` when it charged a statement (with
   * `entries: "query"`, whatever it charged: each REST answer reports its query's cost), and the next statement
   * begins the next query, for its budget. `more`: the client's next queries are already waiting for their
   * answers (it pipelines); with synchronous charges, the charge writer is told to expect their charges, so that
   * they join this one's batch (`ChargeWriter.expect`) rather than wait for a batch of this one alone.
   */
  queryAnswered(more = false): void {
    if (more && this.synchronousCharges) this.#chargesExpected ??= this.#writer.expect();
    if (this.#queryStatements > 0 || this.options.entries === "query") {
      // Copied, not built: most sessions never ask, and this runs at every query's end.
      const last = this.#lastQuery;
      last.statements = this.#queryStatements;
      last.parts = this.#queryParts;
      last.rows = this.#queryRows;
      last.rowsMicro = this.#queryRowsMicro;
      last.costMicro = this.queryCostMicro;
      this.#queryStatements = 0;
      this.#queryParts = NO_COST;
      this.#queryRows = 0;
      this.#queryRowsMicro = 0n;
    }
    this.#queryStartMicro = this.#sessionCostMicro;
    if (this.options.entries === "query") this.closeWindow();
    // The last of a run of pipelined queries: its charge (queued by now, or by `writeCharges` in this same turn)
    // ends the wait.
    if (!more) this.#endExpectedCharges();
  }

  /**
   * The session runs REST's queries (`entries: "query"`): each query's answer carries its cost (a
   * `pgtoll.last_query_cost` ParameterStatus before its ReadyForQuery).
   */
  get servesRest(): boolean {
    return this.options.entries === "query";
  }

  /** The cost and its parts of the session's last query that charged a statement; null before the first. */
  get lastQueryCost(): QueryCost | null {
    const last = this.#lastQuery;
    if (last.statements === 0) return null;
    const byRows = { ...NO_COST, rows: BigInt(last.rows), rowsMicro: last.rowsMicro };
    return { ...addCosts(last.parts, byRows), statements: last.statements, costMicro: last.costMicro };
  }

  /**
   * The budget that stops the running statement when one does: the one with less left of the session's and the
   * query's. Null when neither is set.
   */
  get stoppingBudget(): { kind: "session" | "query"; budgetMicro: bigint; spentMicro: bigint } | null {
    const session = this.#budgetMicro;
    const query = this.#queryBudgetMicro;
    if (
      query !== null &&
      (session === null || query - this.queryCostMicro < session - this.#sessionCostMicro)
    )
      return { kind: "query", budgetMicro: query, spentMicro: this.queryCostMicro };
    if (session === null) return null;
    return { kind: "session", budgetMicro: session, spentMicro: this.#sessionCostMicro };
  }

  /** Whether a budget (the session's or the query's) bounds what the session's statements may cost. */
  get #budgeted(): boolean {
    return this.#budgetMicro !== null || this.#queryBudgetMicro !== null;
  }

  /** What the budgets leave to spend: the least of the session's and the query's; null when neither is set. */
  #budgetLeftMicro(): bigint | null {
    let left: bigint | null = null;
    if (this.#budgetMicro !== null) left = this.#budgetMicro - this.#sessionCostMicro;
    if (this.#queryBudgetMicro !== null) {
      const queryLeft = this.#queryBudgetMicro - this.queryCostMicro;
      if (left === null || queryLeft < left) left = queryLeft;
    }
    return left === null || left > 0n ? left : 0n;
  }

  /** The cost and its parts of the session's last statement, null before its first. */
  get lastStatementCost(): CostBreakdown | null {
    return this.#lastCost;
  }

  /**
   * The running statement names these relations (undefined: what it reads is not in its text): its rows are
   * charged at their table price. Called before its first row.
   */
  priceStatement(relations: readonly string[] | undefined): void {
    if (!this.#rowsOnly) this.#statementPrice = priceForRelations(this.price, relations);
  }

  /** The fast path: the hold's row limit alone decides (rows only, no budget). */
  get #byRows(): boolean {
    return this.#rowsOnly && !this.#budgeted;
  }

  #withinBudget(costMicro: bigint): boolean {
    const left = this.#budgetLeftMicro();
    return left === null || costMicro <= left;
  }

  /** The running statement's cost with `rows` more rows of `bytes` more bytes (no time: it is known at its end). */
  #costWith(rows: number, bytes: number): bigint {
    return statementCost(
      { rows: this.#statementRows + rows, bytes: this.#statementBytes + bytes },
      this.#statementPrice,
    );
  }

  /**
   * Why `rows` more rows of `bytes` bytes cannot be had, asked after `topUp` failed or before it when the budget
   * may stop them: the session's budget, the agent's daily limit (asked of the ledger), or its balance.
   */
  async shortfall(rows = 1, bytes = 0): Promise<Shortfall> {
    const cost = this.#byRows ? this.#costOf(this.#statementRows + rows) : this.#costWith(rows, bytes);
    if (!this.#withinBudget(cost)) return { kind: "budget" };
    return this.#shortfallOf(cost);
  }

  /** Why the hold could not grow to pay `cost`: the agent's daily limit, or its balance. */
  async #shortfallOf(cost: bigint): Promise<Shortfall> {
    const missing = cost - this.#hold.unspent;
    const limit = await dailyLimitRefusing(
      this.#ledger,
      this.agentWallet,
      this.providerId,
      missing > 0n ? missing : 1n,
    ).catch(() => null);
    return limit ? { kind: "daily-limit", limit } : { kind: "unfunded" };
  }

  /** The agent's daily limit with the provider and what it spent today (`SHOW pgtoll.daily_remaining`). */
  dailyLimit(): Promise<DailyLimit> {
    return getDailyLimit(this.#ledger, this.agentWallet, this.providerId);
  }

  /** Whether the price has table prices: a statement's relations then set its row price (`priceStatement`). */
  get pricesTables(): boolean {
    return (this.price.tablePicoUsdcPer1000Rows?.size ?? 0) > 0;
  }

  /** Whether the price counts statement time. */
  get pricesTime(): boolean {
    return (this.price.picoUsdcPerSecond ?? 0n) > 0n;
  }

  /**
   * Milliseconds more the running statement may take, `elapsedMs` into its time: what the hold and the session's
   * budget pay for after its rows and bytes so far (0 or less: no more; Infinity: the price does not count time).
   */
  timeLeftMs(elapsedMs: number): number {
    const usage = { rows: this.#statementRows, bytes: this.#statementBytes };
    let ms = this.#free
      ? Number.POSITIVE_INFINITY
      : msAffordable(this.#hold.unspent, usage, this.#statementPrice);
    const left = this.#budgetLeftMicro();
    if (left !== null) {
      const budgetMs = msAffordable(left, usage, this.#statementPrice);
      if (budgetMs < ms) ms = budgetMs;
    }
    return ms - elapsedMs;
  }

  /**
   * Grows the hold so that the running statement, `elapsedMs` into its time, may go on: by at least its next
   * millisecond and at most as much again as it has taken (the ledger's conditional reservation also holds the
   * agent's daily limit). Null when it may go on; otherwise what stops it. Rejects when the ledger is unreachable.
   */
  async fundTime(elapsedMs: number): Promise<Shortfall | null> {
    const usage = { rows: this.#statementRows, bytes: this.#statementBytes };
    const ms = Math.ceil(elapsedMs) + 1;
    const need = costBreakdown({ ...usage, ms }, this.#statementPrice).costMicro;
    if (!this.#withinBudget(need)) return { kind: "budget" };
    const ahead = Math.max(ms, MIN_TIME_AHEAD_MS);
    const want = costBreakdown({ ...usage, ms: ms + ahead }, this.#statementPrice).costMicro;
    if (await this.#hold.cover(need, want)) return null;
    return this.#shortfallOf(need);
  }

  /** Whether a budget (the session's or the query's) stops `rows` more rows of `bytes` bytes of the running statement. */
  budgetStops(rows = 1, bytes = 0): boolean {
    return this.#budgeted && !this.#withinBudget(this.#costWith(rows, bytes));
  }

  /** A statement's cost by the cost rule ({@link statementCost}) for `rows` rows, remembered for small counts. */
  #costOf(rows: number): bigint {
    if (rows >= 64) return statementCost({ rows }, this.price);
    let cost = this.#smallCosts[rows];
    if (cost === undefined) {
      cost = statementCost({ rows }, this.price);
      this.#smallCosts[rows] = cost;
    }
    return cost;
  }

  #updateLimit(): void {
    // Beyond rows (or under a budget) each run is priced as it comes (#allowPriced): no row limit to keep.
    if (!this.#byRows) return;
    this.#rowLimit = Number(rowsAffordable(this.#hold.unspent, this.price));
    if (this.#free) return;
    const size = this.#hold.size;
    if (size !== this.#halfHoldOf) {
      this.#halfHoldOf = size;
      this.#halfHoldRows = Number(rowsAffordable(size / 2n, this.price));
    }
    this.#aheadRow = this.#rowLimit - this.#halfHoldRows;
  }

  /** Counts one more row; false when the reservation does not pay for it (call `topUp`, then retry). */
  allowRow(): boolean {
    return this.allowRows(1) === 1;
  }

  /**
   * Counts up to `count` more rows at once (a run of DataRows read in one chunk); returns how many the reservation
   * pays for, from 0 to `count`. For the first row it does not pay for: `topUp`, then `allowRow`.
   */
  allowRows(count: number, bytes = 0): number {
    if (!this.#byRows) return this.#allowPriced(count, bytes);
    const before = this.#statementRows;
    const left = this.#rowLimit - before;
    const allowed = count < left ? count : left;
    if (allowed <= 0) return 0;
    this.#statementRows = before + allowed;
    // Past the point where the next part of the hold is reserved: reserve it now, in the background.
    if (before < this.#aheadRow && this.#aheadRow <= this.#statementRows) this.#hold.topUpAhead(true);
    return allowed;
  }

  /**
   * `allowRows` for a price beyond rows or a session with a budget: the run is allowed whole when the statement's
   * cost with its rows and bytes is within the hold and the budget, else not at all (its rows then come one by
   * one). The cost is worked out per run of rows, not per row.
   */
  #allowPriced(count: number, bytes: number): number {
    const cost = this.#costWith(count, bytes);
    if ((!this.#free && cost > this.#hold.unspent) || !this.#withinBudget(cost)) return 0;
    this.#statementRows += count;
    this.#statementBytes += bytes;
    // Less than half of the hold's size left: reserve the next part now, in the background.
    if (!this.#free && (this.#hold.unspent - cost) * 2n < this.#hold.size) this.#hold.topUpAhead(true);
    return count;
  }

  /**
   * Reserves at least enough for `minRows` more rows (of `bytes` bytes) of the running statement (the hold's size
   * when available). Returns false when the agent's available balance cannot pay for them.
   */
  async topUp(minRows = 1, bytes = 0): Promise<boolean> {
    if (this.#free) return true;
    const need = this.#byRows ? this.#costOf(this.#statementRows + minRows) : this.#costWith(minRows, bytes);
    if (!(await this.#hold.cover(need))) return false;
    return !this.#byRows || this.#rowLimit > this.#statementRows || minRows === 0;
  }

  /**
   * Ends the running statement: charges `rowCount` rows to the charge window. The rows are within the hold
   * (each was allowed by `allowRows`), so this is synchronous, unless the window reached the cost bound while an
   * earlier one is still being written: then the promise is what the session waits for.
   */
  endStatement(
    rowCount: number,
    sql: string,
    outcome?: StatementOutcome,
    time?: StatementTime,
    shape?: string,
  ): Promise<void> | undefined {
    if (this.#byRows && !this.#lastCost)
      return this.#charge(this.#costOf(rowCount), rowCount, sql, outcome, undefined, shape);
    const cost = this.#priced(rowCount, time);
    const used = this.#lastCost;
    if (this.#free || cost <= this.#hold.unspent)
      return this.#charge(cost, rowCount, sql, outcome, used, shape);
    // Its time, or the minimum, took it past the hold: what the balance (within the daily limit) can add is
    // charged, and no more.
    return this.#hold
      .cover(cost, 0n)
      .then(async (covered) => {
        if (!covered) await this.#hold.takeAvailable(cost - this.#hold.unspent);
      })
      .catch(() => {})
      .then(() => this.#charge(cost, rowCount, sql, outcome, used, shape));
  }

  /**
   * The running statement's cost by the whole cost rule, its parts kept for `SHOW pgtoll.last_statement_cost`;
   * within the session's budget (its time is known only at its end, and the budget is a promise).
   */
  #priced(rows: number, time: StatementTime | undefined): bigint {
    const price = time?.continued ? { ...this.#statementPrice, minimumMicro: 0n } : this.#statementPrice;
    const breakdown = costBreakdown(
      { rows, bytes: this.#statementBytes, ms: Math.max(0, Math.ceil(time?.ms ?? 0)) },
      price,
    );
    this.#lastCost = breakdown;
    const left = this.#budgetLeftMicro();
    if (left === null) return breakdown.costMicro;
    return breakdown.costMicro < left ? breakdown.costMicro : left;
  }

  /**
   * Ends a write that has run but is not committed: charges `rowCount` rows (its affected count, or its RETURNING
   * rows if more) when the hold, grown as far as the balance allows, pays for them, and answers true. When the
   * balance cannot pay, nothing of the write is charged (only `delivered`, the RETURNING rows the client already
   * received within the hold) and the answer is false: the caller rolls the write back. A ledger that cannot be
   * reached rejects the promise; the caller rolls back then too. Synchronous (`true`) when the hold covers it.
   * `pending`: the write commits only with a transaction the proxy ends later; its charge is taken from the hold
   * but waits for `settleWrites`.
   */
  endWrite(
    rowCount: number,
    delivered: number,
    sql: string,
    time?: StatementTime,
    pending = false,
  ): true | Promise<boolean> {
    const byRows = this.#byRows && !this.#lastCost;
    const cost = byRows ? this.#costOf(rowCount) : this.#priced(rowCount, time);
    const used = byRows ? undefined : this.#lastCost;
    if (cost <= this.#hold.unspent) {
      if (pending) return this.#holdPending({ costMicro: cost, rows: rowCount, delivered, sql, used });
      const waiting = this.#charge(cost, rowCount, sql, undefined, used);
      return waiting ? waiting.then(() => true) : true;
    }
    return this.#endCostlyWrite(cost, rowCount, delivered, sql, used, pending, time);
  }

  /** Takes a write's cost from the hold and keeps its charge until its transaction ends. */
  #holdPending(write: PendingWrite): true {
    this.#statementRows = 0;
    this.#statementBytes = 0;
    this.#statementPrice = this.price;
    if (this.#free) return true;
    const cost = this.#hold.take(write.costMicro);
    this.#sessionCostMicro += cost;
    // Part of its query's cost (`lastQueryCost`) now: the query's answer comes after its transaction ends.
    this.#addToQuery(cost, write.rows, write.used);
    this.#pendingWrites.push({ ...write, costMicro: cost, takenAt: this.#hold.limitChanges });
    this.#updateLimit();
    return true;
  }

  /**
   * The transaction the proxy opened around the pending writes ended: committed, their charges go to the window;
   * rolled back, what they cost goes back to the hold (the agent keeps nothing of them), but for the RETURNING
   * rows the client received, which are charged as read. A promise when the session must wait (see `#charge`).
   */
  settleWrites(committed: boolean): Promise<void> | undefined {
    const writes = this.#pendingWrites;
    if (writes.length === 0) return;
    this.#pendingWrites = [];
    let waiting: Promise<void> | undefined;
    for (const write of writes) {
      if (committed) {
        waiting = this.#addToWindow(write.costMicro, write.rows, write.sql, undefined, write.used) ?? waiting;
        continue;
      }
      const readCost = write.delivered > 0 ? this.#costOf(write.delivered) : 0n;
      const read = readCost < write.costMicro ? readCost : write.costMicro;
      this.#hold.giveBack(write.costMicro - read, write.takenAt);
      this.#sessionCostMicro -= write.costMicro - read;
      if (read > 0n)
        waiting = this.#addToWindow(read, write.delivered, write.sql, "failed", undefined) ?? waiting;
    }
    this.#updateLimit();
    return waiting;
  }

  async #endCostlyWrite(
    cost: bigint,
    rowCount: number,
    delivered: number,
    sql: string,
    used: CostBreakdown | null | undefined,
    pending: boolean,
    time: StatementTime | undefined,
  ): Promise<boolean> {
    if (!(await this.#hold.cover(cost, 0n))) {
      // Rolled back, but its time was the database's: charged as far as the balance pays.
      await this.endStatement(delivered, sql, "failed", time);
      return false;
    }
    if (pending) return this.#holdPending({ costMicro: cost, rows: rowCount, delivered, sql, used });
    await this.#charge(cost, rowCount, sql, undefined, used);
    return true;
  }

  /**
   * Takes a statement's cost from the hold and adds it to the window. Returns a promise, which the session waits
   * for before its next statement, only when its unwritten spending reached the crash bound (`#underCrashBound`).
   */
  #charge(
    costMicro: bigint,
    rows: number,
    sql: string,
    outcome?: StatementOutcome,
    used?: CostBreakdown | null,
    shape?: string,
  ): Promise<void> | undefined {
    this.#statementRows = 0;
    this.#statementBytes = 0;
    this.#statementPrice = this.price;
    if (this.#free) return;
    // Every row was allowed from the hold; a larger count would be a bug, and is not charged beyond the hold.
    const cost = this.#hold.take(costMicro);
    this.#sessionCostMicro += cost;
    this.#addToQuery(cost, rows, used);
    return this.#addToWindow(cost, rows, sql, outcome, used, shape);
  }

  /** Adds a charged statement's parts to the running query's (its whole cost, on a rows-only price, is its rows'). */
  #addToQuery(cost: bigint, rows: number, used: CostBreakdown | null | undefined): void {
    this.#queryStatements++;
    if (used) this.#queryParts = addCosts(this.#queryParts, used);
    else {
      this.#queryRows += rows;
      this.#queryRowsMicro += cost;
    }
  }

  /** Adds a cost already taken from the hold to the window (see `#charge` for the promise). */
  #addToWindow(
    cost: bigint,
    rows: number,
    sql: string,
    outcome?: StatementOutcome,
    used?: CostBreakdown | null,
    shape?: string,
  ): Promise<void> | undefined {
    const perQuery = this.options.entries === "query";
    if (!this.#window) {
      this.#window = new ChargeWindow(perQuery);
      if (!perQuery) this.options.clock.atNextTick(this.#closeOnTick);
    }
    const window = this.#window;
    window.add(sql, rows, cost, outcome, Number(used?.bytes ?? 0), Number(used?.ms ?? 0), shape);
    if (cost > 0n) this.options.onCharge?.(cost);
    if (window.costMicro >= this.options.windowMaxCostMicro) {
      // A query's window is not on the clock: the crash bound closes it itself.
      if (perQuery) this.closeWindow();
      else this.options.clock.tickEarly();
    } else if (outcome === "cutOff" || window.distinctTexts >= MAX_WINDOW_TEXTS) this.closeWindow();
    this.#updateLimit();
    this.#hold.topUpAhead(false);
    return this.#underCrashBound();
  }

  /** What the session has spent that the ledger has not written: its unwritten windows and its open one. */
  get #unwrittenSpendingMicro(): bigint {
    return this.#unwrittenMicro + (this.#window?.costMicro ?? 0n);
  }

  /**
   * A promise the session waits for before its next statement while its unwritten spending is at or above twice
   * the window cost bound; undefined when it is below. Windows the clock closed count as much as those the bound
   * closed: when the ledger stalls, they pile up at one per tick.
   */
  #underCrashBound(): Promise<void> | undefined {
    // The open window is below the bound here (reaching it closed it): the wait ends as the windows before it are
    // written, without closing it early (a window per statement while the ledger lags would only add to its load).
    if (this.#unwrittenSpendingMicro < this.#crashBoundMicro) return undefined;
    if (!this.#crashBoundWait) {
      const wait = deferred();
      const written = wait.promise;
      // While the ledger is out of reach the session is not held for the outage's length: it spends what its
      // hold already holds, then its statements get 57P03 as a top-up fails (billing.md, "What a crash can lose").
      const unavailable = this.#writer.ledgerUnavailable().then(() => {
        if (this.#crashBoundWait === wait) this.#crashBoundWait = null;
      });
      wait.promise = Promise.race([written, unavailable]);
      this.#crashBoundWait = wait;
    }
    return this.#crashBoundWait.promise;
  }

  /** One of the session's windows is written (or its writing failed, which the charge writer reports). */
  #windowWritten(costMicro: bigint): void {
    this.#unwrittenMicro -= costMicro;
    const wait = this.#crashBoundWait;
    if (wait && this.#unwrittenSpendingMicro < this.#crashBoundMicro) {
      this.#crashBoundWait = null;
      wait.resolve();
    }
  }

  /**
   * At a tick the window is closed; at an early tick (another session's window reached the cost bound) only
   * when it has reached half the bound, so that the commit carries windows worth writing, not a crowd of tiny ones.
   */
  readonly #closeOnTick = (early: boolean): void => {
    if (!early || (this.#window && this.#window.costMicro * 2n >= this.options.windowMaxCostMicro))
      this.closeWindow();
  };

  /** Queues the open window's charges for the ledger as one entry (nothing when it cost nothing). */
  closeWindow(): void {
    const charge = this.#takeWindow();
    if (!charge) return;
    this.#unwrittenMicro += charge.costMicro;
    this.#hold.queue(charge, () => this.#windowWritten(charge.costMicro));
  }

  /** Closes the open window; returns its charge, or null when it cost nothing. */
  #takeWindow(): HeldCharge | null {
    const window = this.#window;
    if (!window) return null;
    this.#window = null;
    this.options.clock.cancel(this.#closeOnTick);
    // Without a reservation nothing could be charged (a statement is charged only from a hold).
    if (window.costMicro === 0n || this.#hold.reservationId === null) return null;
    this.#windowsClosed++;
    this.options.onWindowClosed?.(window.statements, window.rows, window.costMicro);
    return {
      costMicro: window.costMicro,
      metadata:
        this.options.entries === "query"
          ? window.queryMetadata(this.options.shapes)
          : window.metadata(this.options.sessionId, this.#windowsClosed, this.options.shapes),
      key: randomUUID(),
    };
  }

  /**
   * Closes the open window and resolves once every charge of the session queued so far is written: "written", or
   * "unavailable" when the writer's next attempt finds the ledger out of reach (the charge writer keeps the charges
   * and retries them; the caller says so rather than wait for the outage's length). Undefined when nothing is
   * left to write.
   */
  writeCharges(): Promise<"written" | "unavailable"> | undefined {
    this.closeWindow();
    if (this.#unwrittenMicro === 0n) return undefined;
    this.#writer.hurry();
    return Promise.race([
      this.#hold.written().then(() => "written" as const),
      this.#writer.ledgerUnavailable(true).then(() => "unavailable" as const),
    ]);
  }

  /** The session's pipelined queries have all been charged, or it stops: it expects no more charges. */
  #endExpectedCharges(): void {
    this.#chargesExpected?.();
    this.#chargesExpected = undefined;
  }

  /** The agent's balance with every charge of this session written: closes the window and waits for it. */
  writtenBalance(): Promise<bigint> {
    this.closeWindow();
    return this.#hold.writtenBalance();
  }

  /**
   * `release` for a session that sits idle (`isIdle`, asked when the hold is given back) and may start a statement
   * at any time: after the hold's top-up in flight has landed, and only if the session is idle then. The hold is
   * emptied in the turn `isIdle` answers, so no statement runs on funds given back under it. Undefined when the
   * session is busy or holds nothing it may give back (see `holdsIdleFunds`).
   */
  releaseIfIdle(isIdle: () => boolean): Promise<void> | undefined {
    if (!isIdle() || !this.holdsIdleFunds) return undefined;
    const landing = this.#hold.topUpLanding;
    if (landing) return landing.then(() => this.releaseIfIdle(isIdle));
    return this.release();
  }

  /**
   * Gives back what the hold still holds, its last window charged in the same statement (a short session: two
   * ledger commits in all), after the session's other windows are written; the next statement starts again from
   * the base hold. A statement that starts meanwhile (an idle session woken up) reserves a hold of its own. When
   * the ledger cannot be reached, the last window is left to the charge writer, which retries it.
   */
  release(): Promise<void> {
    this.#endExpectedCharges();
    // A write whose transaction was still open is not committed: the session ended or went idle without it.
    void this.settleWrites(false);
    return this.#hold.release(() => this.#takeWindow(), "retry");
  }
}
