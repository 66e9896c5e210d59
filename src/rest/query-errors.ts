import { boundText } from "../billing/message-bounds.js";
import { withheldDatabaseText } from "../billing/priced-text.js";
import { SqlState } from "../db/sql-state.js";
import { OversizedMessageError } from "../providers/message-gate.js";
import { ResultMemoryFullError } from "../providers/result-memory.js";
import { ResultTooLargeError } from "./upstream-pipeline.js";

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
 * Turns an error from running statements upstream into the answer: PostgreSQL's own message and SQLSTATE kept,
 * said to be the database's refusal (4xx) or a failed execution (500). "invalid SQL" is kept for the guard's
 * verdict on text that does not parse (metered-query.ts). `withheld`: the statements read a priced table, so the
 * database's text is replaced by billing/priced-text.ts's, which holds no value.
 */
export function upstreamQueryError(error: unknown, statementTimeoutMs: number, withheld = false): QueryError {
  if (error instanceof OversizedMessageError)
    return new QueryError(
      422,
      `result too large: a row (or the database's message) of ${error.bytes} bytes is above the limit of ${error.maxBytes} bytes (PGTOLL_MAX_ROW_BYTES); select less of the large value. Nothing was charged`,
      ROW_TOO_LARGE,
    );
  if (error instanceof ResultMemoryFullError)
    return new QueryError(
      503,
      `pgtoll is busy: the results it is reading for other requests fill its result memory (${error.maxBytes} bytes, PGTOLL_MAX_RESULTS_IN_MEMORY); try again shortly. Nothing was charged`,
      RESULTS_MEMORY_FULL,
    );
  if (error instanceof ResultTooLargeError)
    return new QueryError(
      422,
      `result too large: more than ${error.maxBytes} bytes of rows (PGTOLL_MAX_RESULT_BYTES); add a LIMIT or select fewer columns. Nothing was charged`,
      RESULT_TOO_LARGE,
    );
  const pgError = error as { code?: string; message?: string };
  const code =
    typeof pgError.code === "string" && /^[0-9A-Z]{5}$/.test(pgError.code) ? pgError.code : undefined;
  if (code === SqlState.queryCanceled) {
    return new QueryError(
      500,
      `query execution failed: cancelled after the ${statementTimeoutMs / 1000} s statement timeout`,
      code,
    );
  }
  if (!code) return new QueryError(500, `query execution failed: ${pgError.message ?? String(error)}`);
  const mismatch = code === SqlState.protocolViolation ? paramsMismatch(pgError.message ?? "") : null;
  if (mismatch) return new QueryError(400, mismatch, code);
  const status = statusForSqlState(code);
  if (withheld) return new QueryError(status, withheldDatabaseText(code, "error"), code, undefined, true);
  // The database's text can carry data (a failed cast quotes its whole input): bounded, and charged as a row.
  const detail = boundText(pgError.message ?? "");
  const what = status === 500 ? "query execution failed" : "the database refused the statement";
  return new QueryError(status, `${what}: ${detail} (SQLSTATE ${code})`, code, undefined, true);
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
