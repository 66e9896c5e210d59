import type pg from "pg";
import { sendCancelRequest } from "../providers/cancel-request.js";

interface Watched {
  client: pg.ClientBase;
  /** performance.now() after which a CancelRequest is sent, and after which the connection is destroyed. */
  cancelAt: number;
  killAt: number;
  cancelled: boolean;
}

/** How often running statements are looked at: a cancel goes out at most this late. */
const SWEEP_MS = 250;

const running = new Set<Watched>();
let sweeper: NodeJS.Timeout | undefined;

/** pg's Client fields a CancelRequest and a forced close need (not in its type definitions). */
type ClientInternals = {
  processID: number;
  secretKey: number;
  host: string;
  port: number;
  connection: { stream: { destroy(): void } };
};

function cancelStatement(client: pg.ClientBase): void {
  const internals = client as unknown as ClientInternals;
  void sendCancelRequest(internals.host, internals.port, internals.processID, internals.secretKey);
}

/**
 * The time bound of one request's statements (metered-query.ts): what they may take in all, in milliseconds,
 * when it is less than the statement timeout; each statement run under it takes its time from it.
 */
export interface StatementTimeLimit {
  /** Milliseconds the request's statements may still take. */
  leftMs: number;
  /** Milliseconds they took so far, from sending each to its answer. */
  usedMs: number;
  /** Set once pgtoll cancelled a statement at the limit. */
  reached: boolean;
}

/** A statement was cancelled at its request's time limit: what stopped it is the limit's (metered-query.ts). */
export class TimeLimitReached extends Error {
  constructor(readonly usedMs: number) {
    super(`the statement was stopped at its time limit after ${Math.round(usedMs)} ms`);
    this.name = "TimeLimitReached";
  }
}

function sweep(): void {
  const now = performance.now();
  for (const watched of running) {
    const internals = watched.client as unknown as ClientInternals;
    if (now >= watched.killAt) {
      running.delete(watched);
      internals.connection.stream.destroy();
    } else if (now >= watched.cancelAt && !watched.cancelled) {
      watched.cancelled = true;
      void sendCancelRequest(internals.host, internals.port, internals.processID, internals.secretKey);
    }
  }
  if (running.size === 0) {
    clearInterval(sweeper);
    sweeper = undefined;
  }
}

/**
 * pgtoll's own enforcement of the statement timeout, in case the server's `statement_timeout` is not in force:
 * a CancelRequest 0.5 s after the limit, and the connection is destroyed 3 s after it if even that did not end
 * the statement. One sweep every 250 ms looks at every statement running, rather than two timers per statement.
 *
 * With a `limit` below the timeout (what pays for the statement's time), a CancelRequest goes out the moment it
 * is reached, and the statement rejects with {@link TimeLimitReached}; the sweep stays the backstop, from the
 * limit on.
 */
export async function withStatementTimer<T>(
  client: pg.ClientBase,
  statementTimeoutMs: number,
  statement: Promise<T>,
  limit?: StatementTimeLimit,
): Promise<T> {
  const now = performance.now();
  const bounded = limit !== undefined && limit.leftMs < statementTimeoutMs;
  const boundMs = bounded ? Math.max(0, limit.leftMs) : statementTimeoutMs;
  const watched: Watched = {
    client,
    cancelAt: now + boundMs + 500,
    killAt: now + boundMs + 3000,
    cancelled: false,
  };
  const atLimit = bounded
    ? setTimeout(() => {
        limit.reached = true;
        cancelStatement(client);
      }, boundMs)
    : undefined;
  running.add(watched);
  if (!sweeper) {
    sweeper = setInterval(sweep, SWEEP_MS);
    sweeper.unref();
  }
  try {
    return await statement;
  } catch (error) {
    if (limit?.reached) throw new TimeLimitReached(limit.usedMs + performance.now() - now);
    throw error;
  } finally {
    clearTimeout(atLimit);
    running.delete(watched);
    if (limit) {
      const used = performance.now() - now;
      limit.usedMs += used;
      limit.leftMs -= used;
    }
  }
}
