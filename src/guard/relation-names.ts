import { parseStatements } from "./sql-parser.js";

/**
 * How a relation is named for pricing: `schema.table` when the statement qualifies it, else `table`, with the
 * parser's folding (unquoted names lower case, quoted ones as written). Per-table prices are keyed the same way.
 */
export function relationName(relation: { schemaname?: unknown; relname?: unknown }): string | null {
  if (typeof relation.relname !== "string") return null;
  return typeof relation.schemaname === "string"
    ? `${relation.schemaname}.${relation.relname}`
    : relation.relname;
}

/**
 * Reads a table name as a provider writes it in its prices (`airports`, `public.airports`, `"Mixed Case"`), with
 * PostgreSQL's own grammar, into the key statements are matched against; null when it is not one plain
 * `[schema.]table` name. Needs the guard's parser loaded (loadGuard).
 */
export function parseTableName(text: string): string | null {
  if (text.length === 0 || text.length > 200 || /[;\n\r]/.test(text) || text.includes("--")) return null;
  const parsed = parseStatements(`TABLE ${text}`);
  if (!parsed.ok || parsed.statements.length !== 1) return null;
  const select = parsed.statements[0]!.node.SelectStmt as { fromClause?: unknown[] } | undefined;
  const from = select?.fromClause;
  if (from?.length !== 1) return null;
  const relation = (from[0] as { RangeVar?: Record<string, unknown> }).RangeVar;
  if (!relation || relation.alias !== undefined || relation.catalogname !== undefined) return null;
  return relationName(relation);
}
