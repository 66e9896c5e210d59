import type { ChargeWriter, ChargeWritten } from "./charge-writer.js";
import type { LimitBoundHold, LimitWatch } from "./daily-limit-watch.js";
import { getBalance, type Queryable, type ReservationCharge } from "./ledger.js";
import { LedgerHold, type ReleaseCharge } from "./ledger-hold.js";
import { QueuedCharges } from "./queued-charges.js";

export interface AgentHoldOptions {
  /** Reservation TTL: what is held and never released comes back to the agent after this long. */
  ttlSeconds: number;
  /**
   * The hold's size at first and after each release: what a top-up takes when its holder names no amount. Each
   * such top-up doubles the size first, up to `maxMicro`.
   */
  baseMicro: bigint;
  /** The most a top-up of the hold's own size takes. Default `baseMicro`: the size does not grow. */
  maxMicro?: bigint;
  /**
   * Beyond this and beyond what the holder needs, a top-up takes at most a quarter of the agent's available
   * balance, so that one busy holder leaves funds for the agent's others (see reserveFunds). Default `baseMicro`.
   */
  fairShareAboveMicro?: bigint;
  /**
   * Releases of this agent's other holds in this process that a top-up which falls short waits for, then tries
   * once more: the funds it needs may sit there. The caller starts them (the holds of the agent's idle sessions,
   * `IdleHolds.reclaim`) or returns those in flight; undefined when there are none.
   */
  reclaimOtherHolds?: () => Promise<unknown> | undefined;
  /** Told when a top-up lands or the hold is released: what is unspent changed without the holder taking it. */
  onHeldChanged?: () => void;
  /** Tells the hold, while it holds something, that the agent's daily limit with the provider changed. */
  limits?: LimitWatch;
  /**
   * What the holder has promised from the unspent funds without taking it yet (the rows of a running statement,
   * taken at its end): kept when a new daily limit makes the hold give back the rest. Default 0.
   */
  promised?: () => bigint;
}

/** One charge against the hold: its ledger entry's amount and metadata. */
export interface HeldCharge extends ReleaseCharge {
  /** How long the charge writer retries it while the ledger is unavailable (see ReservationCharge). */
  retryForMs?: number;
}

/**
 * What a release does when the statement that writes its last charge fails: `void` gives the hold back without
 * the charge and rejects (the caller reports that nothing was charged); `retry` leaves the charge to the charge
 * writer, which retries it against the hold while it has not expired.
 */
export type UnwrittenCharge = "void" | "retry";

/**
 * An agent's funds held with one provider for one holder (a wire proxy session, the REST requests of one agent
 * that share a hold), spent from and topped up. It keeps what is held and not spent yet; its holder takes each
 * cost from it without a ledger round trip and gives back what it took and did not spend. When that falls short
 * the holder asks for a top-up: one at a time, the others waiting for it rather than reserving beside it, sized
 * by the holder or by the hold's own adaptive size. A top-up can also be started in the background, ahead of
 * need. Charges are queued on the group-committing charge writer against the hold, and the release waits for
 * them: released first, the hold would leave them to be taken from the available balance instead.
 */
export class AgentHold implements LimitBoundHold {
  /** The reservation held now; a new, empty one once it is released. */
  #funds: LedgerHold;
  /** Micro-USDC held and not yet taken by the holder. */
  #unspent = 0n;
  /** What a top-up of the hold's own size takes: the base, doubled at each such top-up up to the maximum. */
  #size: bigint;
  readonly #base: bigint;
  readonly #max: bigint;
  readonly #fairShareAbove: bigint;
  /** The top-up in flight: others wait for it, and the release waits for it. */
  #inFlight: Promise<bigint> | null = null;
  /** A top-up with no minimum got nothing (the balance is spent): no top-up ahead until one gets funds. */
  #balanceSpent = false;
  readonly #charges: QueuedCharges;
  /** Counts the daily limit changes heard: a top-up that started before the last one may exceed the limit. */
  #limitChanges = 0;
  /** What a daily limit change gives back to the ledger, in flight: the next top-up waits for it. */
  #givingBack: Promise<unknown> | null = null;

  constructor(
    private readonly ledger: Queryable,
    writer: ChargeWriter,
    readonly agentWallet: string,
    readonly providerId: string,
    private readonly options: AgentHoldOptions,
  ) {
    this.#charges = new QueuedCharges(writer);
    this.#funds = this.#newFunds();
    this.#base = options.baseMicro;
    this.#max =
      options.maxMicro !== undefined && options.maxMicro > this.#base ? options.maxMicro : this.#base;
    this.#fairShareAbove = options.fairShareAboveMicro ?? this.#base;
    this.#size = this.#base;
  }

  #newFunds(): LedgerHold {
    return new LedgerHold(this.ledger, this.agentWallet, this.providerId, this.options.ttlSeconds);
  }

  /** Micro-USDC held and not taken yet. */
  get unspent(): bigint {
    return this.#unspent;
  }

  /** What the next top-up of the hold's own size takes, before it doubles. */
  get size(): bigint {
    return this.#size;
  }

  /**
   * A top-up of this hold waits for other holds to be given back. A release waits for the hold's top-up in
   * flight, so this hold must not be asked to give its funds back meanwhile: two such holds would wait for each
   * other. A top-up that waits for nothing else (one ahead of need) only delays a release.
   */
  get reclaiming(): boolean {
    return this.#reclaiming;
  }

  /** The top-up in flight, settled or failed, once it lands; null when none is. */
  get topUpLanding(): Promise<unknown> | null {
    return this.#inFlight?.catch(() => 0n) ?? null;
  }

  /** The reservation's id while something is held; the charges queued against the hold name it. */
  get reservationId(): string | null {
    return this.#funds.reservationId;
  }

  /** Takes up to `micro` of what is unspent; returns what it took (all of it, unless less is unspent). */
  take(micro: bigint): bigint {
    const taken = micro < this.#unspent ? micro : this.#unspent;
    this.#unspent -= taken;
    return taken;
  }

  /** How many daily limit changes the hold was told of: a holder passes it back with what it gives back. */
  get limitChanges(): number {
    return this.#limitChanges;
  }

  /**
   * Puts back what the holder took and did not spend. `takenAt`: `limitChanges` when it was taken; taken before
   * a limit change, it goes back to the ledger instead, as it may be beyond the new limit.
   */
  giveBack(micro: bigint, takenAt = this.#limitChanges): void {
    if (takenAt === this.#limitChanges) this.#unspent += micro;
    else this.#giveBackToLedger(micro);
  }

  /**
   * Makes sure at least `needMicro` is unspent. A top-up in flight is waited for first; when it leaves too little,
   * the hold is topped up by at least what is missing and by at most `upToMicro` (when more) or, without it, by
   * the hold's size, which then doubles. False when the agent's available balance cannot pay what is missing;
   * rejects when the ledger cannot be reached.
   */
  async cover(needMicro: bigint, upToMicro?: bigint): Promise<boolean> {
    for (;;) {
      while (this.#inFlight) {
        await this.#inFlight.catch(() => 0n);
        if (this.#unspent >= needMicro) return true;
      }
      const missing = needMicro > this.#unspent ? needMicro - this.#unspent : 0n;
      let most = upToMicro;
      if (most === undefined) {
        this.#grow();
        most = this.#size;
      }
      const changes = this.#limitChanges;
      const added = await this.#topUp(missing, most > missing ? most : missing);
      // A daily limit changed while it was reserved: that top-up was given back; hold again under the limit.
      if (changes === this.#limitChanges) return added >= missing;
      if (this.#unspent >= needMicro) return true;
    }
  }

  /**
   * Tops the hold up by its size in the background, before the holder needs it: at once when `now`, else only
   * once less than half of the size is unspent. Nothing while nothing is held (the first hold is taken when it
   * is needed), while a top-up is in flight, or after one got nothing (the balance is spent: the next need
   * waits for its own top-up, which reports it). A failure is left to the next `cover`.
   */
  topUpAhead(now: boolean): void {
    if (this.#funds.reservationId === null || this.#inFlight || this.#balanceSpent) return;
    if (!now && this.#unspent * 2n >= this.#size) return;
    this.#grow();
    this.#topUp(0n, this.#size).catch(() => {});
  }

  /**
   * Tops the hold up by as much of the agent's available balance as there is (within its daily limit), up to
   * `upToMicro`, past the fair share: for a holder that bounds what it runs by what it holds (a REST statement's
   * time). Resolves to what it added; rejects when the ledger cannot be reached.
   */
  async takeAvailable(upToMicro: bigint): Promise<bigint> {
    while (this.#inFlight) await this.#inFlight.catch(() => 0n);
    return this.#topUp(0n, upToMicro, upToMicro);
  }

  #grow(): void {
    if (this.#size < this.#max) this.#size = this.#size * 2n < this.#max ? this.#size * 2n : this.#max;
  }

  /** Adds between `minMicro` and `maxMicro` to the hold, as the balance allows; resolves to what it added. */
  #topUp(minMicro: bigint, maxMicro: bigint, fairShareAbove = this.#fairShareAbove): Promise<bigint> {
    const changes = this.#limitChanges;
    const call = this.#reserve(minMicro, maxMicro, fairShareAbove).then(
      (added) => {
        this.#inFlight = null;
        if (added > 0n) this.options.limits?.watch(this);
        if (changes !== this.#limitChanges) {
          // Reserved, perhaps, before the limit changed: not spent from, in case it passes the new limit.
          this.#giveBackToLedger(added);
          return 0n;
        }
        if (added > 0n) {
          this.#balanceSpent = false;
          this.#unspent += added;
          this.options.onHeldChanged?.();
        } else if (minMicro === 0n) {
          this.#balanceSpent = true;
        }
        return added;
      },
      (error: unknown) => {
        this.#inFlight = null;
        throw error;
      },
    );
    this.#inFlight = call;
    return call;
  }

  async #reserve(minMicro: bigint, maxMicro: bigint, fairShareAbove: bigint): Promise<bigint> {
    // Until it is given back, what a limit change gave up still counts against the limit in the ledger.
    if (this.#givingBack) await this.#givingBack;
    const added = await this.#funds.add(minMicro, maxMicro, fairShareAbove);
    if (added >= minMicro) return added;
    // Set first: asked to give its own hold back meanwhile, this hold would wait for this very top-up.
    this.#reclaiming = true;
    try {
      const releases = this.#releasing ?? this.options.reclaimOtherHolds?.();
      if (!releases) return added;
      await releases.catch(() => undefined);
      return await this.#funds.add(minMicro, maxMicro, fairShareAbove);
    } finally {
      this.#reclaiming = false;
    }
  }

  /** A top-up of this hold is waiting for other holds to be given back (`reclaimOtherHolds`). */
  #reclaiming = false;

  /**
   * The agent's daily limit with the provider changed, or may have: what is held and neither spent nor promised
   * to the holder is given back to the ledger, and what the holder needs next is held again, under the limit (the
   * reservation statements enforce it). A top-up in flight is given back when it lands.
   */
  limitChanged(): void {
    this.#limitChanges++;
    this.#balanceSpent = false;
    this.#size = this.#base;
    const promised = this.options.promised?.() ?? 0n;
    const kept = promised < this.#unspent ? promised : this.#unspent;
    const back = this.#unspent - kept;
    this.#unspent = kept;
    this.options.onHeldChanged?.();
    this.#giveBackToLedger(back);
  }

  #giveBackToLedger(micro: bigint): void {
    if (micro <= 0n) return;
    const funds = this.#funds;
    const before = this.#givingBack;
    // On failure the funds stay held until the hold is released or expires: unspendable, not spendable twice.
    const giving: Promise<unknown> = (before ?? Promise.resolve())
      .then(() => funds.giveBack(micro))
      .catch(() => 0n)
      .finally(() => {
        if (this.#givingBack === giving) this.#givingBack = null;
      });
    this.#givingBack = giving;
  }

  /** Queues a charge against the hold on the charge writer; `written` is told once it is written or failed. */
  queue(charge: HeldCharge, written?: ChargeWritten): void {
    const reservationId = this.#funds.reservationId;
    if (reservationId === null) throw new Error("nothing is held to charge against");
    this.#charges.submit(this.#chargeOf(reservationId, charge), written);
  }

  #chargeOf(reservationId: string, charge: HeldCharge): ReservationCharge {
    return { reservationId, agentWallet: this.agentWallet, providerId: this.providerId, ...charge };
  }

  /** Resolves once every charge queued so far is written or has failed. */
  written(): Promise<void> {
    return this.#charges.written();
  }

  /** The agent's balance once every charge queued so far is written. */
  async writtenBalance(): Promise<bigint> {
    await this.#charges.written();
    return (await getBalance(this.ledger, this.agentWallet, this.providerId)).balanceMicro;
  }

  /**
   * Gives back what is held, once the top-up in flight has landed and the charges queued against the hold are
   * written; `last()`, the holder's last charge, taken once nothing more can be added to it, is written in the
   * same statement as the release. The hold is emptied before the first wait for the ledger: a holder that needs
   * funds meanwhile takes a hold of its own instead of spending the one being given back. When the statement
   * fails, see {@link UnwrittenCharge}; without a charge the error is thrown (the reservation then expires).
   *
   * Warning: with a top-up in flight the hold is emptied only once it lands, and what the holder takes from it
   * meanwhile and has not charged by then is lost with it. A holder that may start spending again (an idle
   * session) waits for `topUpLanding` first: with none in flight the hold is emptied before this returns.
   */
  async release(last?: () => HeldCharge | null, ifUnwritten: UnwrittenCharge = "void"): Promise<void> {
    while (this.#inFlight) {
      await this.#inFlight.catch(() => 0n);
      // The holder may be charging what that top-up paid for (a costly write): its charge is queued in this turn.
      await new Promise<void>((resolve) => setImmediate(resolve));
    }
    const charge = last?.() ?? undefined;
    const funds = this.#funds;
    this.options.limits?.unwatch(this);
    const reservationId = funds.reservationId;
    this.#funds = this.#newFunds();
    this.#unspent = 0n;
    this.#balanceSpent = false;
    this.#size = this.#base;
    this.options.onHeldChanged?.();
    const released = this.#releaseFunds(funds, reservationId, charge, ifUnwritten);
    // From here the release waits on the ledger only (no top-up of this hold): a reservation that falls short
    // meanwhile may wait for it.
    this.#releasing = released;
    const forget = () => {
      if (this.#releasing === released) this.#releasing = null;
    };
    released.then(forget, forget);
    await released;
  }

  /**
   * The statement of a release that is not committed yet: a reservation the balance cannot pay meanwhile (the
   * holder woke up) waits for it and tries again, since the funds it gives back are the agent's.
   */
  #releasing: Promise<void> | null = null;

  async #releaseFunds(
    funds: LedgerHold,
    reservationId: string | null,
    charge: HeldCharge | undefined,
    ifUnwritten: UnwrittenCharge,
  ): Promise<void> {
    await this.#charges.written();
    try {
      await funds.release(charge, ifUnwritten === "void");
    } catch (error) {
      if (!charge || ifUnwritten === "void" || reservationId === null) throw error;
      // The key keeps a charge whose acknowledgement was lost from being written twice.
      this.#charges.submit(this.#chargeOf(reservationId, charge));
      await this.#charges.written();
    }
  }
}
