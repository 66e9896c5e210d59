import type { ChargeWriter, ChargeWritten } from "./charge-writer.js";
import { type Deferred, deferred } from "./deferred.js";
import type { ReservationCharge } from "./ledger.js";

/**
 * The charges one reservation holder (a proxy session, a shared REST hold) has queued on a {@link ChargeWriter}
 * and that are not written yet. Releasing the reservation must wait for them: voided first, it would leave
 * them to be taken from the available balance instead. A count and one promise, not a promise per charge:
 * the proxy queues a charge per statement.
 */
export class QueuedCharges {
  #unwritten = 0;
  #allWritten: Deferred | null = null;
  readonly #oneWritten = (): void => {
    --this.#unwritten;
    if (this.#unwritten === 0 && this.#allWritten) {
      this.#allWritten.resolve();
      this.#allWritten = null;
    }
  };

  constructor(private readonly writer: ChargeWriter) {}

  /**
   * Queues a charge; a failure to write it is the writer's to report (its `onError`). `written`, when given, is
   * also told once this charge is written or has failed (a REST request answers only after that).
   */
  submit(charge: ReservationCharge, written?: ChargeWritten): void {
    this.#unwritten++;
    if (!written) {
      this.writer.submit(charge, this.#oneWritten);
      return;
    }
    this.writer.submit(charge, (error) => {
      this.#oneWritten();
      written(error);
    });
  }

  /** Resolves once every charge submitted so far is written or has failed. */
  written(): Promise<void> {
    if (this.#unwritten === 0) return Promise.resolve();
    this.#allWritten ??= deferred();
    return this.#allWritten.promise;
  }
}
