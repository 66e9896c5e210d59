import { randomUUID } from "node:crypto";
import { type Deferred, deferred } from "./deferred.js";
import {
  chargeReservations,
  chargeWithoutReservation,
  InsufficientFundsError,
  type Queryable,
  type ReservationCharge,
} from "./ledger.js";
import { isLedgerUnavailable } from "./ledger-availability.js";

/** Resolves after the current turn of the event loop: its callbacks, microtasks and I/O have run. */
function nextTurn(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/** Told once a charge is written (no argument) or could not be written (the error). */
export type ChargeWritten = (error?: Error) => void;

interface Pending {
  charge: ReservationCharge;
  written: ChargeWritten;
  /** performance.now() of the first attempt that found the ledger unavailable. */
  unavailableSince?: number;
}

/** A batch's outcome: `tell` informs the callers of what was written; `retry` goes back to the queue. */
interface Attempt {
  tell(): void;
  retry: Pending[];
}

/** Waits between attempts while the ledger is unavailable: doubling from the first, up to the last. */
const RETRY_DELAYS_MS = [50, 100, 200, 500, 1000];

export interface ChargeWriterOptions {
  /** Reservation TTL: a batch keeps each charged reservation at least half of it away from expiring. */
  ttlSeconds: number;
  /** Most charges in one batch. Default 500. */
  maxBatch?: number;
  /**
   * Under load, the longest time from one batch's start to the next one's, in milliseconds: when charges
   * queued up while a batch was written, the writer goes on gathering charges while they keep arriving, until
   * this much time has passed since that batch started or `fullBatch` charges are queued. A batch has a fixed
   * cost (measured: about 500 us of PostgreSQL CPU for its transaction, WAL flush and three table updates, and
   * 350 us of this process's, against about 10 and 5 us per entry), so fewer, bigger batches cost less per charge:
   * 16 per batch cost PostgreSQL 42 us per charge, 64 cost 18, 256 cost 15. A charge that finds the writer idle
   * is written at once: a lone session never waits. Callers that await their charge wait at most one
   * `gatherTickMs` once they stop queuing. Default 25; 0 writes every batch as soon as the previous one is done.
   *
   * Warning: charges not yet written are lost if the process dies; a longer interval widens that window (the
   * agent is then charged less, never more).
   */
  batchIntervalMs?: number;
  /** Queued charges that end the wait of `batchIntervalMs` at once. Default 256. */
  fullBatch?: number;
  /**
   * While gathering, the writer stops waiting when no charge arrived for this long (milliseconds): callers that
   * await each charge have then all queued theirs, and waiting longer would only delay them. Default 1.
   */
  gatherTickMs?: number;
  /**
   * How long a batch waits, from its first charge's arrival, for charges announced by `expect` (milliseconds):
   * a session whose client pipelined several queries announces the charges of those still being answered, so that
   * they go in the batch of the first instead of the next one. Default 1.
   */
  expectedChargesWaitMs?: number;
  onError?: (error: unknown, charge: ReservationCharge) => void;
  /** Told how long each batch took to write, in seconds (for /metrics). */
  onBatchWritten?: (seconds: number) => void;
}

function nothingToTell(): void {}

/**
 * Group commit for per-statement charges: while one batch is being written, new charges queue up and go
 * together in the next one, so N busy sessions cost one ledger round trip instead of N. Each charge still
 * gets its own ledger entry, in order. A batch that fails on one charge is retried charge by charge so one
 * bad charge cannot lose the others. One batch at a time: a second batch in flight would not save PostgreSQL
 * any work, only split the same charges into more, smaller batches.
 *
 * While the ledger database is unavailable (restarting, failing over; see `isLedgerUnavailable`) charges stay
 * queued and are retried, for as long as a reservation would hold their funds (`ttlSeconds`); after that they
 * are reported to `onError`. Every charge carries a key written with its entry, so one whose commit was
 * acknowledged on a connection that was then lost is not written twice.
 */
export class ChargeWriter {
  #queue: Pending[] = [];
  #inFlight: Promise<void> | null = null;
  /** Ends the wait between two batches early (a full batch is queued, or someone flushes). */
  #wake: (() => void) | null = null;
  #flushing = 0;
  /** Someone waits for a queued charge (`hurry`): the next batch is not held back to gather more. */
  #hurried = false;
  #corked = 0;
  /** Charges announced by `expect` and not queued yet. */
  #expected = 0;
  /** performance.now() when the queue last went from empty to not: the wait for expected charges counts from it. */
  #queuedSince = 0;
  /** Attempts in a row that found the ledger unavailable. */
  #unavailableAttempts = 0;
  /** Shared by everyone waiting for the ledger to be found unavailable (see `ledgerUnavailable`). */
  #unavailable: Deferred | null = null;
  readonly #maxBatch: number;
  readonly #intervalMs: number;
  readonly #fullBatch: number;
  readonly #tickMs: number;
  readonly #expectedWaitMs: number;

  constructor(
    private readonly db: Queryable,
    private readonly options: ChargeWriterOptions,
  ) {
    this.#maxBatch = options.maxBatch ?? 500;
    this.#intervalMs = options.batchIntervalMs ?? 25;
    this.#fullBatch = Math.min(options.fullBatch ?? 256, this.#maxBatch);
    this.#tickMs = options.gatherTickMs ?? 1;
    this.#expectedWaitMs = options.expectedChargesWaitMs ?? 1;
  }

  /** Queues a charge; resolves once it is durably in the ledger. */
  enqueue(charge: ReservationCharge): Promise<void> {
    return new Promise((resolve, reject) =>
      this.submit(charge, (error) => (error ? reject(error) : resolve())),
    );
  }

  /**
   * Queues a charge and calls `written` once it is durably in the ledger or could not be written. The proxy's
   * per-statement path: no promise per charge. `written` may be called synchronously (a charge of 0).
   */
  submit(charge: ReservationCharge, written: ChargeWritten): void {
    if (charge.costMicro === 0n) {
      written();
      return;
    }
    charge.key ??= randomUUID();
    if (this.#queue.length === 0) this.#queuedSince = performance.now();
    this.#queue.push({ charge, written });
    if (this.#corked === 0) this.#startWriting();
  }

  /**
   * Holds back the queued charges until `uncork`: what is submitted in between goes in one batch. Without it
   * the first charge of a burst finds the writer idle and is written alone, and the rest wait for that commit.
   */
  cork(): void {
    this.#corked++;
  }

  /**
   * Announces charges on their way (a pipelining session's queries still being answered): the next batch waits
   * for them, at most `expectedChargesWaitMs` after its first charge arrived. Call the returned function once
   * they are queued, or will not come; it does nothing the second time.
   */
  expect(): () => void {
    this.#expected++;
    let done = false;
    return () => {
      if (done) return;
      done = true;
      if (--this.#expected === 0) this.#wake?.();
    };
  }

  /** Ends a `cork`: the charges submitted since are written together. */
  uncork(): void {
    if (this.#corked > 0 && --this.#corked === 0 && this.#queue.length > 0) this.#startWriting();
  }

  #startWriting(): void {
    if (!this.#inFlight) this.#inFlight = this.#drain();
    else if (this.#queue.length >= this.#fullBatch) this.#wake?.();
  }

  /**
   * Ends the gathering of the next batch at once: a caller waits for a charge it queued (a session with
   * synchronous charges), and a batch held back to gather more would hold its answer back too. Charges queued
   * while a batch is written still go together into the next one.
   */
  hurry(): void {
    this.#hurried = true;
    this.#wake?.();
  }

  /** Resolves when every charge queued so far is written, without waiting out the batch interval. */
  async flush(): Promise<void> {
    this.#flushing++;
    try {
      this.#wake?.();
      while (this.#inFlight) await this.#inFlight;
    } finally {
      this.#flushing--;
    }
  }

  /**
   * Resolves once a write finds the ledger unavailable, at once while the last one did (unless `nextAttempt`:
   * then only when the next attempt fails too): a session waiting for its charges to be written stops waiting
   * for what cannot come soon.
   */
  ledgerUnavailable(nextAttempt = false): Promise<void> {
    if (!nextAttempt && this.#unavailableAttempts > 0) return Promise.resolve();
    this.#unavailable ??= deferred();
    return this.#unavailable.promise;
  }

  get pending(): number {
    return this.#queue.length;
  }

  async #drain(): Promise<void> {
    try {
      while (this.#queue.length > 0) {
        if (this.#expected > 0) await this.#awaitExpected(this.#queuedSince + this.#expectedWaitMs);
        const started = performance.now();
        this.#hurried = false;
        const { tell, retry } = await this.#write(this.#queue.splice(0, this.#maxBatch));
        this.options.onBatchWritten?.((performance.now() - started) / 1000);
        if (retry.length > 0) {
          tell();
          this.#queue.unshift(...retry);
          const delay = RETRY_DELAYS_MS[Math.min(this.#unavailableAttempts++, RETRY_DELAYS_MS.length - 1)]!;
          this.#unavailable?.resolve();
          this.#unavailable = null;
          await this.#sleep(delay);
          continue;
        }
        this.#unavailableAttempts = 0;
        // Charges queued while this batch was written mean load; those its callers queue once told (below)
        // do not: a lone session awaiting each charge must never wait out the interval.
        const underLoad = this.#queue.length > 0;
        tell();
        if (underLoad) await this.#gather(started + this.#intervalMs);
        // Callers told just now queue their next charge within this turn of the event loop: into the next batch.
        else await nextTurn();
      }
    } finally {
      this.#inFlight = null;
    }
  }

  /**
   * Waits for more charges while they keep coming: until `until` (a performance.now() time), a full batch,
   * a flush, or a tick (`gatherTickMs`) in which none arrived. The last one is what callers that await each
   * charge produce (they have all queued theirs already, and nothing more comes until this batch is written),
   * so they lose at most one tick; the proxy's sessions, which do not wait for their charges, keep the queue
   * growing until the interval is over.
   */
  async #gather(until: number): Promise<void> {
    // Callers told just now queue their next charge within this turn of the event loop: count those in.
    await nextTurn();
    let seen = this.#queue.length;
    while (seen < this.#fullBatch && this.#flushing === 0 && !this.#hurried) {
      const left = until - performance.now();
      if (left <= 0) return;
      await this.#sleep(Math.min(left, this.#tickMs));
      // Let timers that expired with this one queue their charges first.
      await nextTurn();
      if (this.#queue.length === seen) return;
      seen = this.#queue.length;
    }
  }

  /** Waits until no charge is expected any more (see `expect`), a flush, or `until` (a performance.now() time). */
  async #awaitExpected(until: number): Promise<void> {
    while (this.#expected > 0 && this.#flushing === 0 && this.#queue.length < this.#fullBatch) {
      const left = until - performance.now();
      if (left <= 0) return;
      await this.#sleep(left);
    }
  }

  /** Sleeps `ms`, or less when woken (a full batch is queued, or someone flushes). */
  async #sleep(ms: number): Promise<void> {
    await new Promise<void>((resolve) => {
      const timer = setTimeout(done, ms);
      function done() {
        clearTimeout(timer);
        resolve();
      }
      this.#wake = done;
    });
    this.#wake = null;
  }

  /** Writes a batch; returns what tells its callers the outcome, and what is to be retried. */
  async #write(batch: Pending[]): Promise<Attempt> {
    try {
      const { missing } = await chargeReservations(
        this.db,
        batch.map((p) => p.charge),
        this.options.ttlSeconds,
      );
      if (missing.length === 0) {
        return {
          tell: () => {
            for (const pending of batch) pending.written();
          },
          retry: [],
        };
      }
      const missingSet = new Set(missing);
      return this.#writeEach(
        batch.filter((pending) => missingSet.has(pending.charge)),
        false,
        () => {
          for (const pending of batch) if (!missingSet.has(pending.charge)) pending.written();
        },
      );
    } catch (error) {
      if (isLedgerUnavailable(error)) return { tell: nothingToTell, retry: this.#retryable(batch, error) };
      if (batch.length === 1) return { tell: () => this.#failCharge(batch[0]!, error), retry: [] };
      return this.#writeEach(batch, true, nothingToTell);
    }
  }

  /** Writes charges one by one (after a batch failed, or for reservations that are gone). */
  async #writeEach(pendings: Pending[], viaReservation: boolean, before: () => void): Promise<Attempt> {
    const outcomes: (() => void)[] = [before];
    const retry: Pending[] = [];
    for (const pending of pendings) {
      const outcome = await this.#writeAlone(pending, viaReservation);
      if (outcome === "retry") retry.push(...this.#retryable([pending], undefined));
      else outcomes.push(outcome);
    }
    return {
      tell: () => {
        for (const tell of outcomes) tell();
      },
      retry,
    };
  }

  /**
   * The charges that may wait for the ledger longer; those that have waited a reservation's TTL are reported
   * as failed (a charge must not wait forever: its reservation has expired by then).
   */
  #retryable(batch: Pending[], error: unknown): Pending[] {
    const now = performance.now();
    const retry: Pending[] = [];
    for (const pending of batch) {
      pending.unavailableSince ??= now;
      const limitMs = pending.charge.retryForMs ?? this.options.ttlSeconds * 1000;
      if (now - pending.unavailableSince < limitMs) retry.push(pending);
      else this.#failCharge(pending, error ?? new Error("the ledger stayed unavailable"));
    }
    return retry;
  }

  async #writeAlone(pending: Pending, viaReservation: boolean): Promise<(() => void) | "retry"> {
    try {
      if (viaReservation) {
        const { missing } = await chargeReservations(this.db, [pending.charge], this.options.ttlSeconds);
        if (missing.length === 0) return () => pending.written();
      }
      // The reservation expired (e.g. an idle session outlived it): take the cost from the available balance.
      await chargeWithoutReservation(
        this.db,
        pending.charge,
        pending.charge.costMicro,
        pending.charge.metadata,
        pending.charge.key,
      );
      return () => pending.written();
    } catch (error) {
      if (isLedgerUnavailable(error)) return "retry";
      return () => this.#failCharge(pending, error);
    }
  }

  #failCharge(pending: Pending, error: unknown): void {
    this.options.onError?.(error, pending.charge);
    pending.written(error instanceof Error ? error : new InsufficientFundsError(String(error)));
  }
}
