/**
 * The database's own text (message, detail, hint, context...) of an error or notice can carry the values a
 * statement read: a failed cast quotes its whole input, so `string_agg(secret, ',')::int` puts a column's values
 * in one error. Such text is bounded and charged as one row at most, so for a statement that reads a priced
 * table it is withheld on every surface: the agent gets the SQLSTATE and the text below, which holds no value.
 */

/** PostgreSQL's condition classes (errcodes.txt), by the first two characters of a SQLSTATE. */
const CONDITION_CLASSES: ReadonlyMap<string, string> = new Map([
  ["01", "warning"],
  ["02", "no data"],
  ["03", "SQL statement not yet complete"],
  ["08", "connection exception"],
  ["09", "triggered action exception"],
  ["0A", "feature not supported"],
  ["0B", "invalid transaction initiation"],
  ["0F", "locator exception"],
  ["0L", "invalid grantor"],
  ["0P", "invalid role specification"],
  ["0Z", "diagnostics exception"],
  ["20", "case not found"],
  ["21", "cardinality violation"],
  ["22", "data exception"],
  ["23", "integrity constraint violation"],
  ["24", "invalid cursor state"],
  ["25", "invalid transaction state"],
  ["26", "invalid SQL statement name"],
  ["27", "triggered data change violation"],
  ["28", "invalid authorization specification"],
  ["2B", "dependent privilege descriptors still exist"],
  ["2D", "invalid transaction termination"],
  ["2F", "SQL routine exception"],
  ["34", "invalid cursor name"],
  ["38", "external routine exception"],
  ["39", "external routine invocation exception"],
  ["3B", "savepoint exception"],
  ["3D", "invalid catalog name"],
  ["3F", "invalid schema name"],
  ["40", "transaction rollback"],
  ["42", "syntax error or access rule violation"],
  ["44", "WITH CHECK OPTION violation"],
  ["53", "insufficient resources"],
  ["54", "program limit exceeded"],
  ["55", "object not in prerequisite state"],
  ["57", "operator intervention"],
  ["58", "system error"],
  ["72", "snapshot failure"],
  ["F0", "configuration file error"],
  ["HV", "foreign data wrapper error"],
  ["P0", "PL/pgSQL error"],
  ["XX", "internal error"],
]);

/**
 * Whether the database's text for a statement is withheld: the provider prices tables and the statement reads
 * one (`readsPricedTable`, set by the guard), or which statement it is is not known. The one test every surface
 * applies.
 */
export function withholdsDatabaseText(
  statement: { readsPricedTable?: true } | undefined,
  pricesTables: boolean,
): boolean {
  return pricesTables && (statement === undefined || statement.readsPricedTable === true);
}

/**
 * What the agent reads in place of the database's text: the SQLSTATE, its condition class, and why the text is
 * withheld. It names nothing the statement read.
 */
export function withheldDatabaseText(sqlState: string, kind: "error" | "notice"): string {
  const condition = CONDITION_CLASSES.get(sqlState.slice(0, 2)) ?? "unknown condition";
  const what = kind === "error" ? "the database refused the statement" : "the database sent a notice";
  return `${what} (SQLSTATE ${sqlState}, ${condition}); its text is withheld because the statement reads a priced table`;
}
