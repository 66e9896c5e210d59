import type { ChargeSettled, ChargeWriter } from "./charge-writer.js";
import type { ReservationCharge } from "./ledger.js";

/**
 * The charges one reservation holder (a proxy session, a shared REST hold) has queued on a {@link ChargeWriter}
 * and that are not written yet. Releasing the reservation must wait for them: voided first, it would leave
 * them to be taken from the available balance instead. A count and one promise, not a promise per charge:
 * the proxy queues a charge per statement.
 */
export class QueuedCharges {
  #unwritten = 0;
  #allWritten: { promise: Promise<void>; resolve(): void } | null = null;
  readonly #written = (): void => {
    if (--this.#unwritten === 0 && this.#allWritten) {
      this.#allWritten.resolve();
      this.#allWritten = null;
    }
  };

  constructor(private readonly writer: ChargeWriter) {}

  /**
   * Queues a charge; a failure to write it is the writer's to report (its `onError`). `settled`, when given, is
   * also told once this charge is written or has failed (a REST request answers only after that).
   */
  submit(charge: ReservationCharge, settled?: ChargeSettled): void {
    this.#unwritten++;
    if (!settled) {
      this.writer.submit(charge, this.#written);
      return;
    }
    this.writer.submit(charge, (error) => {
      this.#written();
      settled(error);
    });
  }

  /** Resolves once every charge submitted so far is written or has failed. */
  settled(): Promise<void> {
    if (this.#unwritten === 0) return Promise.resolve();
    if (!this.#allWritten) {
      let resolve = () => {};
      const promise = new Promise<void>((done) => (resolve = done));
      this.#allWritten = { promise, resolve };
    }
    return this.#allWritten.promise;
  }
}
