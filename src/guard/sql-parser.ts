import { loadModule, parseSync } from "libpg-query";

/** A parsed top-level statement: its node (`{ SelectStmt: {...} }`) and its text. */
export interface ParsedStatement {
  node: Record<string, unknown>;
  sql: string;
}

export type ParseOutcome = { ok: true; statements: ParsedStatement[] } | { ok: false; message: string };

let loading: Promise<void> | undefined;
let loaded = false;

/** Loads the PostgreSQL parser (WASM) once. Idempotent; await it before the first `checkSql`. */
export function loadGuard(): Promise<void> {
  loading ??= loadModule().then(() => {
    loaded = true;
  });
  return loading;
}

const NON_ASCII = /[\u0080-\uffff]/;
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/**
 * Why the server would read `sql` differently from the parser, or null: a NUL character ends a C string,
 * so the parser would see only what precedes it; a lone UTF-16 surrogate has no UTF-8 form.
 */
export function unreadableText(sql: string): string | null {
  if (sql.includes("\0")) return "query contains a NUL character";
  if (NON_ASCII.test(sql) && LONE_SURROGATE.test(sql)) return "query is not valid Unicode";
  return null;
}

/**
 * Parses `sql` with PostgreSQL 18's own grammar. Synchronous; throws if `loadGuard()` has not resolved.
 * Text the server would read differently from the parser is refused here (see {@link unreadableText}).
 */
export function parseStatements(sql: string): ParseOutcome {
  if (!loaded) throw new Error("pgtoll guard: the SQL parser is not loaded; await loadGuard() first");
  if (sql.trim() === "") return { ok: false, message: "empty query" };
  const unreadable = unreadableText(sql);
  if (unreadable) return { ok: false, message: unreadable };
  const nonAscii = NON_ASCII.test(sql);
  let stmts: { stmt?: unknown; stmt_location?: number; stmt_len?: number }[];
  try {
    stmts = parseSync(sql).stmts ?? [];
  } catch (error) {
    return { ok: false, message: error instanceof Error ? error.message : String(error) };
  }
  if (stmts.length === 0) return { ok: false, message: "query contains no statement" };
  // The parser's locations are byte offsets into the UTF-8 text.
  const bytes = nonAscii ? Buffer.from(sql, "utf8") : undefined;
  const statements: ParsedStatement[] = [];
  for (const raw of stmts) {
    if (raw.stmt === null || typeof raw.stmt !== "object") {
      return { ok: false, message: "parser returned a statement without a node" };
    }
    const start = raw.stmt_location ?? 0;
    const end = raw.stmt_len ? start + raw.stmt_len : undefined;
    const text = bytes ? bytes.toString("utf8", start, end ?? bytes.length) : sql.slice(start, end);
    statements.push({ node: raw.stmt as Record<string, unknown>, sql: text.trim() });
  }
  return { ok: true, statements };
}
