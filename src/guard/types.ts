/** One statement of an allowed SQL string, with what the proxy and the gateway need to know about it. */
export interface GuardedStatement {
  /** The text of this one statement, sliced from the input by the parser's location and length, trimmed. */
  sql: string;
  /**
   * The command tag PostgreSQL reports for it ("SELECT", "INSERT", "BEGIN", "SET", "DECLARE CURSOR", ...).
   * For `EXECUTE` the server reports the tag of the prepared statement, which is unknown here: "EXECUTE".
   */
  command: string;
  /** True when `EXPLAIN (FORMAT JSON) <sql>` is valid for it and plans it without running it. */
  explainable: boolean;
  /**
   * True when the statement can send rows (DataRow, or CopyData for COPY TO STDOUT).
   * Conservative: `EXECUTE` counts as row-returning because the prepared body is not known here.
   */
  returnsRows: boolean;
  /** BEGIN / START TRANSACTION / COMMIT / ROLLBACK / SAVEPOINT / RELEASE / ROLLBACK TO. */
  transactionControl: boolean;
  /**
   * True when running it may write rows whose count its CommandComplete reports: INSERT, UPDATE, DELETE, MERGE,
   * and `EXECUTE` (the prepared body is not known here). Writes are paid for before they are committed.
   */
  writes: boolean;
  /**
   * Every relation the statement names (`table` or `schema.table`, see relation-names.ts), for per-table prices;
   * undefined when what it reads is not in its text (EXECUTE, FETCH).
   */
  relations?: string[];
  /**
   * It reads a table the policy prices (`GuardPolicy.tablePrices`), or, under a policy with table prices, what it
   * reads is not in its text (EXECUTE, FETCH). The database's error and notice text for it is then withheld
   * (billing/priced-text.ts): it could carry the table's values at less than their price.
   */
  readsPricedTable?: true;
  /** For `COPY ... TO STDOUT` in text or CSV with a header line: the first CopyData is that line, not a row. */
  copyHeader?: true;
  /**
   * For `SHOW`, `SET` or `RESET` of `pgtoll.<name>`: the name (lower case, e.g. "pgtoll.balance"). The proxy
   * answers these itself; the provider's database has no such setting.
   */
  pgtollSetting?: string;
  /**
   * For `SET pgtoll.<name> = value` the value as text; null for `RESET pgtoll.<name>` and `SET ... TO DEFAULT`;
   * absent for `SHOW`. The proxy applies these itself.
   */
  pgtollValue?: string | null;
  /**
   * Set when the verdict came from a learned literal shape (verdict-shapes.ts): the same string for every text of
   * that shape, which differ only in masked literals. What is charged counts such statements together, without
   * reading each text again. It names the shape, not a text: it holds no literal of any statement.
   */
  shape?: string;
}

/** The guard's answer for one SQL string. `deny` of any statement denies the whole string. */
export type GuardVerdict =
  | { kind: "allow"; statements: GuardedStatement[] }
  | { kind: "deny"; rule: string; message: string }
  | { kind: "invalid"; message: string };

/** Why a statement is refused: a short stable rule id and a sentence for the client. */
export interface Denial {
  rule: string;
  message: string;
}

/**
 * A statement policy. Statement kinds are a fixed allowlist (see README); a policy tunes the parts that
 * providers reasonably differ on. Build variants by spreading `standardPolicy`.
 */
export interface GuardPolicy {
  /** Name for logs and error messages. */
  readonly name: string;
  /**
   * Allow `COPY table TO STDOUT` and `COPY (query) TO STDOUT` (the query is checked like any other).
   * COPY to or from a file or PROGRAM, and COPY FROM STDIN, are denied whatever this says.
   */
  readonly allowCopyOut: boolean;
  /**
   * Run-time parameters (GUC names, lower case) that `SET`, `SET LOCAL`, `SET ... TO DEFAULT` and `RESET`
   * may change. Warning: never add parameters that change how SQL text is lexed
   * (standard_conforming_strings, backslash_quote) or limits the provider relies on (statement_timeout,
   * role, session_authorization): the guard parses with PostgreSQL's defaults.
   */
  readonly settableParameters: ReadonlySet<string>;
  /** Function names (last name segment, lower case) that may not be called anywhere in a statement. */
  readonly forbiddenFunctions: ReadonlySet<string>;
  /** Function name prefixes (lower case) that may not be called anywhere in a statement. */
  readonly forbiddenFunctionPrefixes: readonly string[];
  /**
   * The provider's table prices (`table` or `schema.table`, matched as billing/cost.ts matches them; only the
   * names matter here). A statement that reads one may not fold many rows into one (row-folding.ts, rule
   * `priced-table-folding`) unless `allowRowFolding`, and is marked `readsPricedTable`.
   */
  readonly tablePrices?: ReadonlyMap<string, bigint>;
  /**
   * Statements that read a priced table may fold rows (string_agg, array_agg, ARRAY(subquery), scalar
   * subqueries...): the provider prices them by other means (`pricePerMB`) or accepts it.
   */
  readonly allowRowFolding?: boolean;
}
