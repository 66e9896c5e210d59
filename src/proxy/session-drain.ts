import { SqlState } from "../db/sql-state.js";
import { errorFrame } from "./proxy-errors.js";

/** What a stopping server asks of one open wire session. */
export interface DrainableSession {
  /** End once idle outside a transaction (at once if it is now), with {@link restartFarewell}. */
  endWhenIdle(): void;
  /** End now, whatever the session is doing: its grace is over. */
  endNow(): void;
}

/** The message of the FATAL (57P01) a session hears when the server stops under it. */
export const RESTART_MESSAGE =
  "terminating connection because the server is restarting; connect again to continue";

/** The FATAL ErrorResponse, SQLSTATE 57P01 (admin_shutdown), that ends a session of a stopping server. */
export function restartFarewell(): Buffer {
  return errorFrame(SqlState.adminShutdown, RESTART_MESSAGE, { fatal: true });
}

/**
 * The open wire sessions of one proxy, for a graceful stop: `begin()` lets each finish its statement and
 * transaction and then ends it; `endAll()` ends those left when the grace is over. A session that opens
 * while the server drains is asked to end at its first idle moment.
 */
export class SessionDrain {
  readonly #sessions = new Set<DrainableSession>();
  readonly #emptied: (() => void)[] = [];
  #draining = false;

  /** True once `begin()` was called. */
  get draining(): boolean {
    return this.#draining;
  }

  get size(): number {
    return this.#sessions.size;
  }

  /** Tracks a session until the returned function is called (when it ends). */
  add(session: DrainableSession): () => void {
    this.#sessions.add(session);
    if (this.#draining) session.endWhenIdle();
    return () => {
      this.#sessions.delete(session);
      if (this.#sessions.size === 0) for (const resolve of this.#emptied.splice(0)) resolve();
    };
  }

  /** Asks every session to end once it is idle outside a transaction. */
  begin(): void {
    this.#draining = true;
    for (const session of [...this.#sessions]) session.endWhenIdle();
  }

  /** Ends every session still open. */
  endAll(): void {
    for (const session of [...this.#sessions]) session.endNow();
  }

  /** Resolves once no session is open. */
  whenEmpty(): Promise<void> {
    if (this.#sessions.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.#emptied.push(resolve));
  }
}
