/** Failures of a metered query, each with the HTTP status the gateway answers it with. */
export class QueryError extends Error {
  constructor(
    readonly statusCode: 400 | 402 | 403 | 404 | 500,
    message: string,
    /** SQLSTATE of an upstream error, when there was one. */
    readonly sqlState?: string,
  ) {
    super(message);
    this.name = "QueryError";
  }
}

/**
 * SQLSTATE classes that mean the statement itself is wrong (the client's fault): answered 400 "invalid SQL".
 * Everything else (timeouts, resources, connection loss, internal errors) is 500 "query execution failed".
 */
const CLIENT_ERROR_CLASSES = new Set(["0A", "21", "22", "23", "26", "2B", "34", "3D", "3F", "42", "44"]);

export function upstreamQueryError(error: unknown, statementTimeoutMs: number): QueryError {
  const pgError = error as { code?: string; message?: string };
  const code =
    typeof pgError.code === "string" && /^[0-9A-Z]{5}$/.test(pgError.code) ? pgError.code : undefined;
  if (code === "57014") {
    return new QueryError(
      500,
      `query execution failed: cancelled after the ${statementTimeoutMs / 1000} s statement timeout`,
      code,
    );
  }
  if (code && CLIENT_ERROR_CLASSES.has(code.slice(0, 2))) {
    return new QueryError(400, `invalid SQL: ${pgError.message} (SQLSTATE ${code})`, code);
  }
  const detail = pgError.message ?? String(error);
  return new QueryError(500, `query execution failed: ${detail}${code ? ` (SQLSTATE ${code})` : ""}`, code);
}
