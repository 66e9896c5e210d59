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

function sweep(): void {
  const now = performance.now();
  for (const watched of running) {
    const internals = watched.client as unknown as {
      processID: number;
      secretKey: number;
      host: string;
      port: number;
      connection: { stream: { destroy(): void } };
    };
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
 */
export async function withStatementTimer<T>(
  client: pg.ClientBase,
  statementTimeoutMs: number,
  statement: Promise<T>,
): Promise<T> {
  const now = performance.now();
  const watched: Watched = {
    client,
    cancelAt: now + statementTimeoutMs + 500,
    killAt: now + statementTimeoutMs + 3000,
    cancelled: false,
  };
  running.add(watched);
  if (!sweeper) {
    sweeper = setInterval(sweep, SWEEP_MS);
    sweeper.unref();
  }
  try {
    return await statement;
  } finally {
    running.delete(watched);
  }
}
