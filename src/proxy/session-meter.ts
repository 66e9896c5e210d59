import { randomUUID } from "node:crypto";
import { ChargeWindow, type StatementOutcome } from "../billing/charge-window.js";
import type { ChargeWriter } from "../billing/charge-writer.js";
import { costOfRows, isFree, type Price, rowsAffordable } from "../billing/cost.js";
import { getBalance, type Queryable, type ReservationCharge } from "../billing/ledger.js";
import { LedgerHold } from "../billing/ledger-hold.js";
import { QueuedCharges } from "../billing/queued-charges.js";
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
  /** Called for every statement's charge, for metrics. */
  onCharge?: (costMicro: bigint) => void;
  /** Called for every window that closes with a charge: its statements, rows and cost, for metrics. */
  onWindowClosed?: (statements: number, rows: number, costMicro: bigint) => void;
}

/** Distinct texts a window keeps before it is closed early (simple-protocol clients inline their values). */
const MAX_WINDOW_TEXTS = 2000;

/**
 * The wire proxy's side of two-phase charging for one client session. The session holds a reservation (part of
 * the agent's balance) and spends it statement by statement: rows are forwarded only while the reservation
 * still pays for them (`allowRow`), and each completed statement's cost, by the cost rule, is taken from the
 * hold at once (`endStatement`). Charges are written to the ledger per charge window: one entry sums the
 * window's statements, written at the clock's next tick (at most its interval after the window opened), when
 * it reaches `windowMaxCostMicro`, or when the session is cut off, goes idle or ends. The hold is adaptive: it doubles at each top-up while the session
 * spends (up to `maxReserveRows`), the next part is reserved in the background once less than half of the
 * hold's size is left (at the end of a statement or in the middle of a long result), and it shrinks back when
 * the session goes idle (`release`), so in steady state no row waits for the ledger.
 */
export class SessionMeter {
  /** The funds held now; replaced by an empty one when they are given back (`release`). */
  #funds: LedgerHold;
  /** Micro-USDC of the reservation not yet spent (spent means charged, written or not). */
  #unspent = 0n;
  #statementRows = 0;
  #rowLimit = 0;
  /** Row of the running statement at which the next part of the hold is reserved ahead. */
  #aheadRow = -1;
  /** Closed windows queued for the ledger and not yet written; `release` waits for them. */
  readonly #charges: QueuedCharges;
  /** Costs of small row counts, the common case, so a statement does not redo the bigint arithmetic. */
  readonly #smallCosts: bigint[] = [];
  /** Reservation calls in flight: `release` waits for them, or one made just after it would stay held. */
  readonly #ledgerCalls = new Set<Promise<unknown>>();
  readonly #baseHold: bigint;
  readonly #maxHold: bigint;
  /** The size the hold grows by: `#baseHold`, doubled at each top-up up to `#maxHold`. */
  #hold: bigint;
  #halfHoldRows = 0;
  readonly #free: boolean;
  /** The top-up started ahead of need (see `#extendAhead`), while it is in flight. */
  #ahead: Promise<void> | null = null;
  /** The last top-up ahead got nothing: the balance is spent, so the next need waits for its own. */
  #balanceSpent = false;
  #window: ChargeWindow | null = null;
  #windowsClosed = 0;
  #sessionCostMicro = 0n;

  constructor(
    private readonly ledger: Queryable,
    writer: ChargeWriter,
    readonly agentWallet: string,
    readonly providerId: string,
    readonly price: Price,
    private readonly options: MeterOptions,
  ) {
    this.#charges = new QueuedCharges(writer);
    this.#funds = this.#emptyHold();
    this.#free = isFree(price);
    const base = costOfRows(options.reserveRows, price);
    this.#baseHold = base > 0n ? base : 1n;
    const max = costOfRows(Math.max(options.maxReserveRows, options.reserveRows), price);
    this.#maxHold = max > this.#baseHold ? max : this.#baseHold;
    this.#hold = this.#baseHold;
    this.#setHold(this.#baseHold);
    // Nothing is held yet: no row is paid for, unless the provider charges nothing (then none is ever limited).
    this.#updateLimit();
  }

  #emptyHold(): LedgerHold {
    return new LedgerHold(this.ledger, this.agentWallet, this.providerId, this.options.reservationTtlSeconds);
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
    return this.#free || this.#unspent >= this.#costOf(1);
  }

  /** {@link costOfRows} for this session's price, remembered for small counts. */
  #costOf(rows: number): bigint {
    if (rows >= 64) return costOfRows(rows, this.price);
    let cost = this.#smallCosts[rows];
    if (cost === undefined) {
      cost = costOfRows(rows, this.price);
      this.#smallCosts[rows] = cost;
    }
    return cost;
  }

  #setHold(hold: bigint): void {
    this.#hold = hold;
    this.#halfHoldRows = Number(rowsAffordable(hold / 2n, this.price));
  }

  /** The hold grows with what the session spends: each top-up doubles it, up to the maximum. */
  #grow(): void {
    if (this.#hold < this.#maxHold)
      this.#setHold(this.#hold * 2n < this.#maxHold ? this.#hold * 2n : this.#maxHold);
  }

  #updateLimit(): void {
    this.#rowLimit = Number(rowsAffordable(this.#unspent, this.price));
    this.#aheadRow = this.#free ? -1 : this.#rowLimit - this.#halfHoldRows;
  }

  /** Counts one more row; false when the reservation does not pay for it (call `topUp`, then retry). */
  allowRow(): boolean {
    return this.allowRows(1) === 1;
  }

  /**
   * Counts up to `count` more rows at once (a run of DataRows read in one chunk); returns how many the reservation
   * pays for, from 0 to `count`. For the first row it does not pay for: `topUp`, then `allowRow`.
   */
  allowRows(count: number): number {
    const before = this.#statementRows;
    const left = this.#rowLimit - before;
    const allowed = count < left ? count : left;
    if (allowed <= 0) return 0;
    this.#statementRows = before + allowed;
    // Past the point where the next part of the hold is reserved: reserve it now, in the background.
    if (before < this.#aheadRow && this.#aheadRow <= this.#statementRows) this.#extendAhead(true);
    return allowed;
  }

  /**
   * Reserves at least enough for `minRows` more rows of the running statement (the hold's size when available).
   * Returns false when the agent's available balance cannot pay for them.
   */
  async topUp(minRows = 1): Promise<boolean> {
    if (this.#free) return true;
    if (this.#ahead) {
      await this.#ahead;
      if (this.#costOf(this.#statementRows + minRows) <= this.#unspent) return true;
    }
    this.#grow();
    const needed = this.#costOf(this.#statementRows + minRows) - this.#unspent;
    const minDelta = needed > 0n ? needed : 0n;
    const maxDelta = minDelta > this.#hold ? minDelta : this.#hold;
    const added = await this.#ledgerCall(this.#funds.add(minDelta, maxDelta, this.#baseHold));
    if (added < minDelta) return false;
    if (added > 0n) this.#balanceSpent = false;
    this.#unspent += added;
    this.#updateLimit();
    return this.#rowLimit > this.#statementRows || minRows === 0;
  }

  /**
   * Reserves the next part of the hold in the background: at the end of a statement once less than half of the
   * hold's size is left, or in the middle of a result when its rows reach that point (`midStatement`). The row
   * limit grows when it lands. A failure is left to the next `topUp`, which reports it when the funds are
   * really needed.
   */
  #extendAhead(midStatement: boolean): void {
    const funds = this.#funds;
    if (funds.reservationId === null || this.#ahead || this.#balanceSpent) return;
    if (!midStatement && this.#unspent * 2n >= this.#hold) return;
    this.#grow();
    const call = this.#ledgerCall(funds.add(0n, this.#hold, this.#baseHold));
    this.#ahead = call.then(
      (added) => {
        this.#ahead = null;
        if (added === 0n) this.#balanceSpent = true;
        // The session may have ended (released) while the call ran: what it added is then released with it.
        if (this.#funds !== funds) return;
        this.#unspent += added;
        this.#updateLimit();
      },
      () => {
        this.#ahead = null;
      },
    );
  }

  /**
   * Ends the running statement: charges `rowCount` rows to the charge window. The rows are within the hold
   * (each was allowed by `allowRows`), so this is synchronous, unless the window reached the cost bound while an
   * earlier one is still being written: then the promise is what the session waits for.
   */
  endStatement(rowCount: number, sql: string, outcome?: StatementOutcome): Promise<void> | undefined {
    let cost = this.#costOf(rowCount);
    // Every row was allowed from the hold; a larger count would be a bug, and is not charged beyond the hold.
    if (cost > this.#unspent) cost = this.#unspent;
    return this.#charge(cost, rowCount, sql, outcome);
  }

  /**
   * Ends a write that has run but is not committed: charges `rowCount` rows (its affected count, or its RETURNING
   * rows if more) when the hold, grown as far as the balance allows, pays for them, and answers true. When the
   * balance cannot pay, nothing of the write is charged (only `delivered`, the RETURNING rows the client already
   * received within the hold) and the answer is false: the caller rolls the write back. A ledger that cannot be
   * reached rejects the promise; the caller rolls back then too. Synchronous (`true`) when the hold covers it.
   */
  endWrite(rowCount: number, delivered: number, sql: string): true | Promise<boolean> {
    const cost = this.#costOf(rowCount);
    if (cost <= this.#unspent) {
      const waiting = this.#charge(cost, rowCount, sql);
      return waiting ? waiting.then(() => true) : true;
    }
    return this.#endCostlyWrite(cost, rowCount, delivered, sql);
  }

  async #endCostlyWrite(cost: bigint, rowCount: number, delivered: number, sql: string): Promise<boolean> {
    if (this.#ahead) await this.#ahead;
    if (cost > this.#unspent) await this.#holdMore(cost - this.#unspent);
    if (cost > this.#unspent) {
      await this.endStatement(delivered, sql, "failed");
      return false;
    }
    await this.#charge(cost, rowCount, sql);
    return true;
  }

  /** Adds up to `missingMicro` to the hold (or takes a first hold), as much as the balance allows. */
  async #holdMore(missingMicro: bigint): Promise<void> {
    this.#unspent += await this.#ledgerCall(this.#funds.add(0n, missingMicro));
  }

  /**
   * Adds a statement's cost to the window. Returns a promise, which the session waits for, only when the window
   * reached the cost bound while an earlier window of the session is still being written: what a crash can leave
   * uncharged stays within the window being written and the open one.
   */
  #charge(cost: bigint, rows: number, sql: string, outcome?: StatementOutcome): Promise<void> | undefined {
    this.#statementRows = 0;
    if (this.#free) return;
    this.#unspent -= cost;
    this.#sessionCostMicro += cost;
    if (!this.#window) {
      this.#window = new ChargeWindow();
      this.options.clock.atNextTick(this.#closeOnTick);
    }
    const window = this.#window;
    window.add(sql, rows, cost, outcome);
    if (cost > 0n) this.options.onCharge?.(cost);
    let waiting: Promise<void> | undefined;
    if (window.costMicro >= this.options.windowMaxCostMicro) {
      this.options.clock.tickEarly();
      if (this.#charges.unwritten > 1) waiting = this.#charges.allButOneWritten();
    } else if (outcome === "cutOff" || window.distinctTexts >= MAX_WINDOW_TEXTS) this.closeWindow();
    this.#updateLimit();
    this.#extendAhead(false);
    return waiting;
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
    if (charge) this.#charges.submit(charge);
  }

  /** Closes the open window; returns its charge, or null when it cost nothing. */
  #takeWindow(): ReservationCharge | null {
    const window = this.#window;
    if (!window) return null;
    this.#window = null;
    this.options.clock.cancel(this.#closeOnTick);
    const reservationId = this.#funds.reservationId;
    // Without a reservation nothing could be charged (a statement is charged only from a hold).
    if (window.costMicro === 0n || reservationId === null) return null;
    this.#windowsClosed++;
    this.options.onWindowClosed?.(window.statements, window.rows, window.costMicro);
    return {
      reservationId,
      agentWallet: this.agentWallet,
      providerId: this.providerId,
      costMicro: window.costMicro,
      metadata: window.metadata(this.options.sessionId, this.#windowsClosed, this.options.shapes),
      key: randomUUID(),
    };
  }

  /** The agent's balance with every charge of this session written: closes the window and waits for it. */
  async writtenBalance(): Promise<bigint> {
    this.closeWindow();
    await this.#charges.written();
    return (await getBalance(this.ledger, this.agentWallet, this.providerId)).balanceMicro;
  }

  #ledgerCall<T>(call: Promise<T>): Promise<T> {
    this.#ledgerCalls.add(call);
    const done = () => this.#ledgerCalls.delete(call);
    call.then(done, done);
    return call;
  }

  /**
   * Closes the window, waits for reservation calls in flight and this session's charges to be written, then
   * gives back what the reservation still holds; the next statement starts again from the base hold. The hold
   * is detached before the first wait: a statement that starts meanwhile (an idle session woken up) reserves a
   * hold of its own instead of spending the one being given back.
   */
  async release(): Promise<void> {
    // A statement may still be being charged (a costly write): give it the moment it needs to queue its charge.
    while (this.#ledgerCalls.size > 0) {
      await Promise.allSettled([...this.#ledgerCalls]);
      await new Promise<void>((resolve) => setImmediate(resolve));
    }
    const last = this.#takeWindow();
    const funds = this.#funds;
    this.#funds = this.#emptyHold();
    this.#unspent = 0n;
    this.#balanceSpent = false;
    this.#setHold(this.#baseHold);
    this.#updateLimit();
    await this.#charges.written();
    // The last window is charged and the hold given back in one commit (a short session: two in all).
    try {
      await funds.release(last ?? undefined);
    } catch (error) {
      if (!last) throw error;
      // Left to the charge writer, which retries while the ledger is unavailable and reports what it cannot
      // write; the key keeps a charge whose acknowledgement was lost from being written twice. The hold expires.
      this.#charges.submit(last);
      await this.#charges.written();
    }
  }
}
