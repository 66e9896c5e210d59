import { randomUUID } from "node:crypto";
import { AgentHold, type HeldCharge } from "../billing/agent-hold.js";
import { ChargeWindow, type StatementOutcome } from "../billing/charge-window.js";
import type { ChargeWriter } from "../billing/charge-writer.js";
import { costOfRows, isFree, type Price, rowsAffordable, statementCost } from "../billing/cost.js";
import type { Queryable } from "../billing/ledger.js";
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
 * - The crash bound: a session whose window reaches the cost bound while its window before is still being
 *   written waits for that commit, so what a crash can leave uncharged per session is at most twice the bound.
 */
export class SessionMeter {
  readonly #hold: AgentHold;
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
  #window: ChargeWindow | null = null;
  #windowsClosed = 0;
  #sessionCostMicro = 0n;

  constructor(
    ledger: Queryable,
    writer: ChargeWriter,
    readonly agentWallet: string,
    readonly providerId: string,
    readonly price: Price,
    private readonly options: MeterOptions,
  ) {
    this.#free = isFree(price);
    const base = costOfRows(options.reserveRows, price);
    this.#hold = new AgentHold(ledger, writer, agentWallet, providerId, {
      ttlSeconds: options.reservationTtlSeconds,
      baseMicro: base > 0n ? base : 1n,
      maxMicro: costOfRows(Math.max(options.maxReserveRows, options.reserveRows), price),
      onHeldChanged: () => this.#updateLimit(),
    });
    // Nothing is held yet: no row is paid for, unless the provider charges nothing (then none is ever limited).
    this.#updateLimit();
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
    return this.#free || this.#hold.unspent >= this.#costOf(1);
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
  allowRows(count: number): number {
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
   * Reserves at least enough for `minRows` more rows of the running statement (the hold's size when available).
   * Returns false when the agent's available balance cannot pay for them.
   */
  async topUp(minRows = 1): Promise<boolean> {
    if (this.#free) return true;
    if (!(await this.#hold.cover(this.#costOf(this.#statementRows + minRows)))) return false;
    return this.#rowLimit > this.#statementRows || minRows === 0;
  }

  /**
   * Ends the running statement: charges `rowCount` rows to the charge window. The rows are within the hold
   * (each was allowed by `allowRows`), so this is synchronous, unless the window reached the cost bound while an
   * earlier one is still being written: then the promise is what the session waits for.
   */
  endStatement(rowCount: number, sql: string, outcome?: StatementOutcome): Promise<void> | undefined {
    return this.#charge(this.#costOf(rowCount), rowCount, sql, outcome);
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
    if (cost <= this.#hold.unspent) {
      const waiting = this.#charge(cost, rowCount, sql);
      return waiting ? waiting.then(() => true) : true;
    }
    return this.#endCostlyWrite(cost, rowCount, delivered, sql);
  }

  async #endCostlyWrite(cost: bigint, rowCount: number, delivered: number, sql: string): Promise<boolean> {
    if (!(await this.#hold.cover(cost, 0n))) {
      await this.endStatement(delivered, sql, "failed");
      return false;
    }
    await this.#charge(cost, rowCount, sql);
    return true;
  }

  /**
   * Takes a statement's cost from the hold and adds it to the window. Returns a promise, which the session waits
   * for, only when the window reached the cost bound while an earlier window of the session is still being
   * written: what a crash can leave uncharged stays within the window being written and the open one.
   */
  #charge(
    costMicro: bigint,
    rows: number,
    sql: string,
    outcome?: StatementOutcome,
  ): Promise<void> | undefined {
    this.#statementRows = 0;
    if (this.#free) return;
    // Every row was allowed from the hold; a larger count would be a bug, and is not charged beyond the hold.
    const cost = this.#hold.take(costMicro);
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
      waiting = this.#hold.allButOneWritten();
    } else if (outcome === "cutOff" || window.distinctTexts >= MAX_WINDOW_TEXTS) this.closeWindow();
    this.#updateLimit();
    this.#hold.topUpAhead(false);
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
    if (charge) this.#hold.queue(charge);
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
      metadata: window.metadata(this.options.sessionId, this.#windowsClosed, this.options.shapes),
      key: randomUUID(),
    };
  }

  /** The agent's balance with every charge of this session written: closes the window and waits for it. */
  writtenBalance(): Promise<bigint> {
    this.closeWindow();
    return this.#hold.writtenBalance();
  }

  /**
   * Gives back what the hold still holds, its last window charged in the same statement (a short session: two
   * ledger commits in all), after the session's other windows are written; the next statement starts again from
   * the base hold. A statement that starts meanwhile (an idle session woken up) reserves a hold of its own. When
   * the ledger cannot be reached, the last window is left to the charge writer, which retries it.
   */
  release(): Promise<void> {
    return this.#hold.release(() => this.#takeWindow(), "retry");
  }
}
