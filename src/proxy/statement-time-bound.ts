import { performance } from "node:perf_hooks";
import type { CutOffReason, StatementMetering } from "./statement-metering.js";

/** What the time bound asks of the upstream side of a session (upstream-answers.ts). */
export interface TimedStatements {
  /**
   * When the statement being answered began to take the database's time (performance.now()); undefined when none
   * of the client's is running (nothing upstream, the proxy's own statement, or one already cut off).
   */
  runningSince(): number | undefined;
  /** Whether anything is still upstream: a statement behind the proxy's own may start without being sent now. */
  busy(): boolean;
  /** Counts the statements that ended: it changes when the running one ends. */
  readonly ended: number;
  /** Cuts the running statement off for `reason`: its time is charged, the client gets the error, it is cancelled. */
  stop(reason: CutOffReason): void;
}

/**
 * Longest wait between two looks at a running statement: rows it reads meanwhile spend what was held for its
 * time, so the moment it stops being paid for can come earlier than the look before foresaw.
 */
const MAX_LOOK_MS = 100;

/**
 * The time bound of one wire session: no statement runs longer than what is held for it and the session's budget
 * pay for. One timer per session, armed when a statement is sent and set for the moment that stops being paid for
 * (never per row): then the hold is grown (which the agent's balance and daily limit allow, or not), and the timer
 * set again, or the statement is cut off and charged its time as far as it was held. Only for a price that counts
 * time.
 */
export class StatementTimeBound {
  #timer: NodeJS.Timeout | undefined;
  /** A top-up for time is in flight: its answer looks again. */
  #funding = false;
  #closed = false;

  constructor(
    private readonly metering: Pick<StatementMetering, "timeLeftMs" | "fundTime">,
    private readonly statements: TimedStatements,
  ) {}

  /** A statement was sent: looks at once, unless a look is already due. */
  arm(): void {
    if (this.#timer === undefined && !this.#funding && !this.#closed) this.#look();
  }

  /** The session ended: no more looks. */
  close(): void {
    this.#closed = true;
    clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  readonly #look = (): void => {
    this.#timer = undefined;
    if (this.#closed) return;
    const since = this.statements.runningSince();
    if (since === undefined) {
      if (this.statements.busy()) this.#lookIn(MAX_LOOK_MS);
      return;
    }
    const elapsed = performance.now() - since;
    const left = this.metering.timeLeftMs(elapsed);
    if (left > 0) {
      this.#lookIn(left < MAX_LOOK_MS ? Math.ceil(left) : MAX_LOOK_MS);
      return;
    }
    const ended = this.statements.ended;
    this.#funding = true;
    this.metering.fundTime(elapsed).then(
      (reason) => this.#funded(ended, reason),
      () => this.#funded(ended, "ledger-unavailable"),
    );
  };

  #funded(ended: number, reason: CutOffReason | undefined): void {
    this.#funding = false;
    if (this.#closed) return;
    if (
      reason !== undefined &&
      this.statements.ended === ended &&
      this.statements.runningSince() !== undefined
    ) {
      this.statements.stop(reason);
      this.#lookIn(MAX_LOOK_MS);
      return;
    }
    this.#look();
  }

  #lookIn(ms: number): void {
    this.#timer = setTimeout(this.#look, ms);
    this.#timer.unref();
  }
}
