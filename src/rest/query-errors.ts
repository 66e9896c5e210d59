import { SqlState } from "../db/sql-state.js";
import type { NoticeFields } from "../proxy/backend-messages.js";
import { ROW_TOO_LARGE_PREFIX } from "../proxy/metering-errors.js";

/** Failures of a metered query, each with the HTTP status the gateway answers it with. */
export class QueryError extends Error {
  constructor(
    readonly statusCode: 400 | 402 | 403 | 404 | 422 | 500 | 503,
    message: string,
    /** SQLSTATE of an error PostgreSQL raised, or pgtoll's own code (budget_exceeded), sent as `code`. */
    readonly sqlState?: string,
    /** With a 402 after the statement ran: what its result costs (a top-up offer asks for at least that). */
    readonly costMicro?: bigint,
    /** The message carries the database's own text: it is bounded, and charged as one row. */
    readonly databaseText = false,
  ) {
    super(message);
    this.name = "QueryError";
  }
}

/** The answer to a query the agent's balance cannot start. */
export const INSUFFICIENT_BALANCE = "insufficient balance: deposit funds with this provider first";
/** The proxy's words for a session or statement refused before anything ran (funds-refusal.ts, metering-errors.ts). */
const NOT_RUN =
  /^insufficient funds: |^insufficient balance: deposit funds with this provider to run statements/;

/** `code` of a result with a row above PGTOLL_MAX_ROW_BYTES. */
export const ROW_TOO_LARGE = "row_too_large";
/** `code` of a result above PGTOLL_MAX_RESULT_BYTES. */
export const RESULT_TOO_LARGE = "result_too_large";
/** `code` of a result refused because the process's result memory (PGTOLL_MAX_RESULTS_IN_MEMORY) is full. */
export const RESULTS_MEMORY_FULL = "results_memory_full";

/** `code` of an answer refused or cut off by a budget the agent set (never 402: paying would not help). */
export const BUDGET_EXCEEDED = "budget_exceeded";

type RefusalStatus = 400 | 403 | 500;

/**
 * How an error PostgreSQL raised while running a statement is answered, within the spec's statuses for
 * `POST /api/query`: a full SQLSTATE first, then its class (the first two characters); anything not listed is
 * 500 "query execution failed". 400: the statement or its data is wrong and the agent can fix it. 403: the role
 * may not do it. 500: the server could not run it now (timeouts, resources, lost connections, internal).
 */
export const STATUS_BY_SQLSTATE: Readonly<Record<string, RefusalStatus>> = {
  [SqlState.insufficientPrivilege]: 403, // the provider's role: the provider's role may not touch that object
  [SqlState.readOnlyTransaction]: 403, // read_only_sql_transaction: a write on a read-only provider
  "28": 403, // invalid authorization specification
  "0A": 400, // feature not supported
  "21": 400, // cardinality violation
  "22": 400, // data exception: division by zero, bad cast, value out of range
  "23": 400, // integrity constraint violation: foreign key, unique, not null, check
  "25": 400, // invalid transaction state (other than read-only)
  "26": 400, // invalid SQL statement name (EXECUTE of an unknown prepared statement)
  "2B": 400, // dependent privilege descriptors still exist
  "34": 400, // invalid cursor name
  "3D": 400, // invalid catalog name
  "3F": 400, // invalid schema name
  "42": 400, // syntax error or access rule violation: undefined table, column, function
  "44": 400, // WITH CHECK OPTION violation
};

/** The status for a SQLSTATE, by the table above. */
export function statusForSqlState(code: string): RefusalStatus {
  return STATUS_BY_SQLSTATE[code] ?? STATUS_BY_SQLSTATE[code.slice(0, 2)] ?? 500;
}

/**
 * The REST answer to an error the statement pipeline ended a query with: pgtoll's own refusals (the agent's funds,
 * a budget, a limit, the ledger) with their status, and PostgreSQL's by the table above, its text as the proxy
 * relayed it (bounded, and withheld for a priced table: proxy/database-notices.ts).
 */
export function pipelineQueryError(fields: NoticeFields, statementTimeoutMs?: number): QueryError {
  const code = fields.code ?? "";
  const message = fields.message ?? "the query failed";
  switch (code) {
    case SqlState.insufficientFunds:
      // Refused before anything ran (at the session's start, or before its statement): the spec's words. A
      // result cut off, a write rolled back or a time bound say what became of them.
      return new QueryError(402, NOT_RUN.test(message) ? INSUFFICIENT_BALANCE : message);
    case SqlState.queryCanceled:
      if (statementTimeoutMs !== undefined)
        return new QueryError(
          500,
          `query execution failed: cancelled after the ${statementTimeoutMs / 1000} s statement timeout`,
          code,
        );
      break;
    case SqlState.budgetExceeded:
      return new QueryError(422, `over budget: ${message}`, BUDGET_EXCEEDED);
    case SqlState.connectionRejected:
      // The proxy would not open the agent's session (the provider's role turned superuser, …).
      return new QueryError(403, message, code);
    case SqlState.cannotConnectNow:
    case SqlState.tooManyConnections:
      return new QueryError(503, message, code);
    case SqlState.programLimitExceeded:
      // A row above PGTOLL_MAX_ROW_BYTES, refused unread; or a write above the provider's rows per statement.
      return message.startsWith(ROW_TOO_LARGE_PREFIX)
        ? new QueryError(422, `result too large: ${message}`, ROW_TOO_LARGE)
        : new QueryError(403, message, code);
    case SqlState.protocolViolation: {
      const mismatch = paramsMismatch(message);
      if (mismatch) return new QueryError(400, mismatch, code);
      break;
    }
  }
  if (!/^[0-9A-Z]{5}$/.test(code)) return new QueryError(500, `query execution failed: ${message}`);
  const status = statusForSqlState(code);
  const what = status === 500 ? "query execution failed" : "the database refused the statement";
  return new QueryError(status, `${what}: ${message} (SQLSTATE ${code})`, code, undefined, true);
}

const plural = (count: number, word: string) => `${count} ${word}${count === 1 ? "" : "s"}`;

/**
 * The agent's message for PostgreSQL's refusal of a Bind whose value count differs from the statement's
 * placeholder count, or null for any other protocol violation. It is the only protocol violation an agent's
 * request can cause (pgtoll writes every other message itself), so it is the agent's fault: a 400.
 */
function paramsMismatch(message: string): string | null {
  const match =
    /^bind message supplies (\d+) parameters, but prepared statement "[^"]*" requires (\d+)$/.exec(message);
  if (!match) return null;
  const [given, wanted] = [Number(match[1]), Number(match[2])];
  const range = wanted > 1 ? `$1 to $${wanted}` : "$1";
  return `params has ${plural(given, "value")} but the statement has ${plural(wanted, "placeholder")}${wanted ? ` (${range})` : ""}: give one value per placeholder`;
}
