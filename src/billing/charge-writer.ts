import {
  chargeReservations,
  chargeWithoutReservation,
  InsufficientFundsError,
  type Queryable,
  type ReservationCharge,
} from "./ledger.js";

interface Pending {
  charge: ReservationCharge;
  resolve(): void;
  reject(error: Error): void;
}

/**
 * Group commit for per-statement charges: while one batch is being written, new charges queue up and go
 * together in the next one, so N busy sessions cost one ledger round trip instead of N. Each charge still
 * gets its own ledger entry, in order. A batch that fails on one charge is retried charge by charge so one
 * bad charge cannot lose the others.
 */
export class ChargeWriter {
  #queue: Pending[] = [];
  #inFlight: Promise<void> | null = null;

  constructor(
    private readonly db: Queryable,
    private readonly options: {
      ttlSeconds: number;
      maxBatch?: number;
      onError?: (error: unknown, charge: ReservationCharge) => void;
    },
  ) {}

  /** Queues a charge; resolves once it is durably in the ledger. */
  enqueue(charge: ReservationCharge): Promise<void> {
    if (charge.costMicro === 0n) return Promise.resolve();
    return new Promise((resolve, reject) => {
      this.#queue.push({ charge, resolve, reject });
      if (!this.#inFlight) this.#inFlight = this.#drain();
    });
  }

  /** Resolves when every charge queued so far is written. */
  async flush(): Promise<void> {
    while (this.#inFlight) await this.#inFlight;
  }

  get pending(): number {
    return this.#queue.length;
  }

  async #drain(): Promise<void> {
    try {
      while (this.#queue.length > 0) {
        const batch = this.#queue.splice(0, this.options.maxBatch ?? 500);
        await this.#write(batch);
      }
    } finally {
      this.#inFlight = null;
    }
  }

  async #write(batch: Pending[]): Promise<void> {
    try {
      const { missing } = await chargeReservations(
        this.db,
        batch.map((p) => p.charge),
        this.options.ttlSeconds,
      );
      const missingSet = new Set(missing);
      await Promise.all(
        batch.map(async (pending) => {
          if (missingSet.has(pending.charge)) await this.#writeAlone(pending);
          else pending.resolve();
        }),
      );
    } catch (error) {
      if (batch.length === 1) return this.#settleFailure(batch[0]!, error);
      for (const pending of batch) await this.#writeAlone(pending, true);
    }
  }

  async #writeAlone(pending: Pending, viaReservation = false): Promise<void> {
    try {
      if (viaReservation) {
        const { missing } = await chargeReservations(this.db, [pending.charge], this.options.ttlSeconds);
        if (missing.length === 0) return pending.resolve();
      }
      // The reservation expired (e.g. an idle session outlived it): take the cost from the available balance.
      await chargeWithoutReservation(
        this.db,
        pending.charge,
        pending.charge.costMicro,
        pending.charge.metadata,
      );
      pending.resolve();
    } catch (error) {
      this.#settleFailure(pending, error);
    }
  }

  #settleFailure(pending: Pending, error: unknown): void {
    this.options.onError?.(error, pending.charge);
    pending.reject(error instanceof Error ? error : new InsufficientFundsError(String(error)));
  }
}
