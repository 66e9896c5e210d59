import { SqlState } from "../db/sql-state.js";
/**
 * Whether an error means the ledger database could not be reached or is going away (a restart, a failover,
 * full connection slots), rather than that it refused the statement: such a statement may be retried, and an
 * agent is told to try again shortly, not that its request was wrong. SQLSTATE classes 08 (connection
 * exception), 57P01-57P03 (shutdown, cannot connect now) and 53300 (too many connections); socket errors;
 * node-postgres' own messages for a connection that ended or could not be made in time.
 */
export function isLedgerUnavailable(error: unknown): boolean {
  const { code, message } = (error ?? {}) as { code?: unknown; message?: unknown };
  if (typeof code === "string") {
    if (code.startsWith("08") || UNAVAILABLE_CODES.has(code)) return true;
  }
  return typeof message === "string" && UNAVAILABLE_MESSAGES.test(message);
}

const UNAVAILABLE_CODES = new Set([
  SqlState.adminShutdown,
  SqlState.crashShutdown,
  SqlState.cannotConnectNow,
  SqlState.tooManyConnections,
  "ECONNREFUSED",
  "ECONNRESET",
  "EPIPE",
  "ETIMEDOUT",
  "EHOSTUNREACH",
  "ENETUNREACH",
]);

const UNAVAILABLE_MESSAGES =
  /Connection terminated|connection timeout|timeout exceeded when trying to connect|Client has encountered a connection error|the database system is (starting up|shutting down|in recovery mode)/i;
