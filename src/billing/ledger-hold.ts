import {
  extendReservation,
  type Queryable,
  type Reservation,
  releaseWithCharge,
  reserveFunds,
  shrinkReservation,
  voidReservation,
} from "./ledger.js";

/** The charge written as a hold is released: one `query` entry, in the same statement as the release. */
export interface ReleaseCharge {
  costMicro: bigint;
  metadata: Record<string, unknown>;
  /** Written with the entry, so that a retry of a charge whose acknowledgement was lost does not repeat it. */
  key?: string;
}

/**
 * One agent's funds held with one provider, for one holder (a wire proxy session, a REST gateway's requests): a
 * ledger reservation taken at the first need and extended at the next ones. This is the one place that chooses
 * between taking a reservation and extending it. A holder makes one `add` at a time, and starts a new hold
 * after `release`.
 */
export class LedgerHold {
  #reservation: Reservation | null = null;
  #released = false;

  constructor(
    private readonly ledger: Queryable,
    readonly agentWallet: string,
    readonly providerId: string,
    private readonly ttlSeconds: number,
  ) {}

  /** The reservation's id while something is held; charges written against the hold name it. */
  get reservationId(): string | null {
    return this.#reservation?.id ?? null;
  }

  /**
   * Adds between `minMicro` and `maxMicro` to the hold, as much as the agent's available balance allows, and
   * pushes its expiry out. Returns what was added: 0n, with nothing changed, when less than `minMicro` is
   * available. `fairShareAboveMicro`: a hold above this takes at most a quarter of the available balance
   * (see reserveFunds).
   */
  async add(minMicro: bigint, maxMicro: bigint, fairShareAboveMicro = maxMicro): Promise<bigint> {
    if (this.#released) throw new Error("this hold was released; start a new one");
    if (this.#reservation)
      return extendReservation(
        this.ledger,
        this.#reservation,
        minMicro,
        maxMicro,
        this.ttlSeconds,
        fairShareAboveMicro,
      );
    const reservation = await reserveFunds(this.ledger, {
      agentWallet: this.agentWallet,
      providerId: this.providerId,
      minMicro,
      maxMicro,
      ttlSeconds: this.ttlSeconds,
      fairShareAboveMicro,
    });
    if (!reservation) return 0n;
    this.#reservation = reservation;
    return reservation.amountMicro;
  }

  /** Gives back up to `micro` of what is held, keeping the hold open; resolves to what was given back. */
  async giveBack(micro: bigint): Promise<bigint> {
    if (!this.#reservation || micro <= 0n) return 0n;
    return shrinkReservation(this.ledger, this.#reservation, micro);
  }

  /**
   * Gives back what is held, writing `charge` (when it costs something) in the same statement. When that
   * statement fails the error is thrown: with `voidOnFailure` the hold is given back without the charge first
   * (the caller reports the failure), without it the hold is left to expire, for a charge writer to retry the
   * charge against it.
   */
  async release(charge?: ReleaseCharge, voidOnFailure = false): Promise<void> {
    this.#released = true;
    const reservation = this.#reservation;
    this.#reservation = null;
    if (!reservation) return;
    if (!charge || charge.costMicro === 0n) return voidReservation(this.ledger, reservation);
    try {
      await releaseWithCharge(this.ledger, reservation, charge.costMicro, charge.metadata, charge.key);
    } catch (error) {
      if (voidOnFailure) await voidReservation(this.ledger, reservation).catch(() => {});
      throw error;
    }
  }
}
