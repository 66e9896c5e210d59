import type { Logger } from "pino";
import type { Queryable } from "../billing/ledger.js";
import type { RefusalTally } from "./refusal-tally.js";

/** How often counted refusals are written: a provider's refusals view lags by at most this. */
export const REFUSAL_FLUSH_INTERVAL_MS = 10_000;

/**
 * Writes `tally`'s counts to `refusal_counts` every `intervalMs`; a failed write keeps them for the next. The
 * returned function stops the timer and writes what is left (a process that stops loses no count).
 */
export function startRefusalFlusher(
  tally: RefusalTally,
  db: Queryable,
  logger: Logger,
  intervalMs = REFUSAL_FLUSH_INTERVAL_MS,
): () => Promise<void> {
  const flush = () =>
    tally.flushTo(db).catch((error) => logger.warn({ err: error }, "could not write the refusal counts"));
  const timer = setInterval(flush, intervalMs);
  timer.unref();
  return async () => {
    clearInterval(timer);
    await flush();
  };
}
