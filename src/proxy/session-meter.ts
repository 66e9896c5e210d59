import type { ChargeWriter } from "../billing/charge-writer.js";
import { costOfRows, type Price, rowsAffordable } from "../billing/cost.js";
import {
  extendReservation,
  type Queryable,
  type Reservation,
  reserveFunds,
  voidReservation,
} from "../billing/ledger.js";
import { QueuedCharges } from "../billing/queued-charges.js";

export interface MeterOptions {
  /** Rows' worth of funds a session holds at a time; more is reserved as results grow. */
  reserveRows: number;
  reservationTtlSeconds: number;
  /** Called for every charge queued, for metrics. */
  onCharge?: (costMicro: bigint) => void;
}

/**
 * The wire proxy's side of two-phase charging for one client session. The session holds a reservation (a
 * chunk of the agent's balance) and spends it statement by statement: rows are forwarded only while the
 * reservation still pays for them (`allowRow`), a statement's cost is charged when it completes
 * (`endStatement`, through the group-committing {@link ChargeWriter}), and `topUp` grows the reservation when
 * it runs out. Once less than half a chunk is left, the next chunk is reserved in the background, so a busy
 * session does not stop for a ledger round trip every chunk's worth of statements. What is not spent goes back
 * to the balance at `release`.
 */
export class SessionMeter {
  #reservation: Reservation | null = null;
  /** Micro-USDC of the reservation not yet charged. */
  #unspent = 0n;
  #statementRows = 0;
  #rowLimit = 0;
  /** Charges queued and not yet written; `release` waits for them. */
  readonly #charges: QueuedCharges;
  /** Costs of small row counts, the common case, so a statement does not redo the bigint arithmetic. */
  readonly #smallCosts: bigint[] = [];
  /** Reservation calls in flight: `release` waits for them, or one made just after it would stay held. */
  readonly #ledgerCalls = new Set<Promise<unknown>>();
  readonly #chunkMicro: bigint;
  readonly #free: boolean;
  /** The top-up started ahead of need (see `#extendAhead`), while it is in flight. */
  #ahead: Promise<void> | null = null;
  /** The last top-up ahead got nothing: the balance is spent, so the next need waits for its own. */
  #balanceSpent = false;

  constructor(
    private readonly ledger: Queryable,
    writer: ChargeWriter,
    readonly agentWallet: string,
    readonly providerId: string,
    readonly price: Price,
    private readonly options: MeterOptions,
  ) {
    this.#charges = new QueuedCharges(writer);
    this.#free = price.priceMicroPer1000Rows === 0n;
    // Nothing is held yet: no row is paid for, unless the provider charges nothing (then none is ever limited).
    this.#rowLimit = Number(rowsAffordable(0n, price));
    const chunk = costOfRows(options.reserveRows, price);
    this.#chunkMicro = chunk > 0n ? chunk : 1n;
  }

  /** Rows of the running statement so far. */
  get statementRows(): number {
    return this.#statementRows;
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

  /** Counts one more row; false when the reservation does not pay for it (call `topUp`, then retry). */
  allowRow(): boolean {
    if (this.#statementRows >= this.#rowLimit) return false;
    this.#statementRows++;
    return true;
  }

  /**
   * Reserves at least enough for `minRows` more rows of the running statement (a chunk when available).
   * Returns false when the agent's available balance cannot pay for them.
   */
  async topUp(minRows = 1): Promise<boolean> {
    if (this.#free) return true;
    if (this.#ahead) {
      await this.#ahead;
      if (this.#costOf(this.#statementRows + minRows) <= this.#unspent) return true;
    }
    const needed = this.#costOf(this.#statementRows + minRows) - this.#unspent;
    const minDelta = needed > 0n ? needed : 0n;
    const maxDelta = minDelta > this.#chunkMicro ? minDelta : this.#chunkMicro;
    let added: bigint;
    if (!this.#reservation) {
      this.#reservation = await this.#ledgerCall(
        reserveFunds(this.ledger, {
          agentWallet: this.agentWallet,
          providerId: this.providerId,
          minMicro: minDelta,
          maxMicro: maxDelta,
          ttlSeconds: this.options.reservationTtlSeconds,
        }),
      );
      added = this.#reservation?.amountMicro ?? 0n;
      if (!this.#reservation || added < minDelta) return false;
    } else {
      const ttl = this.options.reservationTtlSeconds;
      const reservation = this.#reservation;
      added = await this.#ledgerCall(extendReservation(this.ledger, reservation, minDelta, maxDelta, ttl));
      if (added < minDelta) return false;
    }
    if (added > 0n) this.#balanceSpent = false;
    this.#unspent += added;
    this.#rowLimit = Number(rowsAffordable(this.#unspent, this.price));
    return this.#rowLimit > this.#statementRows || minRows === 0;
  }

  /**
   * Reserves the next chunk in the background once less than half of one is left. The running statement's
   * row limit grows when it lands (the limit counts what is unspent before the statement's own charge). A
   * failure is left to the next `topUp`, which reports it when the funds are really needed.
   */
  #extendAhead(): void {
    const reservation = this.#reservation;
    if (!reservation || this.#ahead || this.#balanceSpent || this.#unspent * 2n >= this.#chunkMicro) return;
    const ttl = this.options.reservationTtlSeconds;
    const call = this.#ledgerCall(extendReservation(this.ledger, reservation, 0n, this.#chunkMicro, ttl));
    this.#ahead = call.then(
      (added) => {
        this.#ahead = null;
        if (added === 0n) this.#balanceSpent = true;
        // The session may have ended (released) while the call ran: what it added is then released with it.
        if (this.#reservation !== reservation) return;
        this.#unspent += added;
        this.#rowLimit = Number(rowsAffordable(this.#unspent, this.price));
      },
      () => {
        this.#ahead = null;
      },
    );
  }

  /**
   * Ends the running statement: charges `rowCount` rows (the DataRows delivered, or a write's affected
   * count). Synchronous (the charge is queued for group commit) unless the cost exceeds what is held, which
   * only a write can do: then the reservation is grown, and if the balance cannot cover the cost the agent is
   * charged what it has and the promise reports the shortfall.
   */
  endStatement(
    rowCount: number,
    metadata: Record<string, unknown>,
  ): Promise<{ unpaidMicro: bigint }> | undefined {
    const cost = this.#costOf(rowCount);
    if (cost > this.#unspent) return this.#endCostlyStatement(cost, metadata);
    this.#charge(cost, 0n, metadata);
    return undefined;
  }

  async #endCostlyStatement(
    cost: bigint,
    metadata: Record<string, unknown>,
  ): Promise<{ unpaidMicro: bigint }> {
    if (this.#ahead) await this.#ahead;
    if (cost <= this.#unspent) {
      this.#charge(cost, 0n, metadata);
      return { unpaidMicro: 0n };
    }
    if (this.#reservation) {
      const ttl = this.options.reservationTtlSeconds;
      const missing = cost - this.#unspent;
      const reservation = this.#reservation;
      this.#unspent += await this.#ledgerCall(extendReservation(this.ledger, reservation, 0n, missing, ttl));
    } else {
      this.#reservation = await this.#ledgerCall(
        reserveFunds(this.ledger, {
          agentWallet: this.agentWallet,
          providerId: this.providerId,
          minMicro: 0n,
          maxMicro: cost,
          ttlSeconds: this.options.reservationTtlSeconds,
        }),
      );
      this.#unspent += this.#reservation?.amountMicro ?? 0n;
    }
    // The balance never goes below zero: what it cannot cover is recorded, not charged.
    const charged = cost > this.#unspent ? this.#unspent : cost;
    const unpaidMicro = cost - charged;
    this.#charge(charged, unpaidMicro, metadata);
    return { unpaidMicro };
  }

  #charge(cost: bigint, unpaidMicro: bigint, metadata: Record<string, unknown>): void {
    if (cost > 0n && this.#reservation) {
      this.#unspent -= cost;
      this.#charges.submit({
        reservationId: this.#reservation.id,
        agentWallet: this.agentWallet,
        providerId: this.providerId,
        costMicro: cost,
        metadata: unpaidMicro > 0n ? { ...metadata, unpaidMicro: unpaidMicro.toString() } : metadata,
      });
      this.options.onCharge?.(cost);
      this.#extendAhead();
    }
    this.#statementRows = 0;
    this.#rowLimit = Number(rowsAffordable(this.#unspent, this.price));
  }

  #ledgerCall<T>(call: Promise<T>): Promise<T> {
    this.#ledgerCalls.add(call);
    const done = () => this.#ledgerCalls.delete(call);
    call.then(done, done);
    return call;
  }

  /**
   * Waits for reservation calls in flight and this session's charges to be written, then gives back what the
   * reservation still holds.
   */
  async release(): Promise<void> {
    // A statement may still be settling (a costly write): give it the moment it needs to queue its charge.
    while (this.#ledgerCalls.size > 0) {
      await Promise.allSettled([...this.#ledgerCalls]);
      await new Promise<void>((resolve) => setImmediate(resolve));
    }
    await this.#charges.settled();
    if (this.#reservation) {
      const reservation = this.#reservation;
      this.#reservation = null;
      this.#unspent = 0n;
      await voidReservation(this.ledger, reservation);
    }
  }
}
