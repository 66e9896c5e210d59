import type { Denial } from "./types.js";

/** Statement kinds that write rows; their CommandComplete reports how many. */
const WRITE_KINDS = new Set(["InsertStmt", "UpdateStmt", "DeleteStmt", "MergeStmt"]);

export function isWriteKind(kind: string): boolean {
  return WRITE_KINDS.has(kind);
}

/**
 * The body of the one write a top-level statement may hold, or undefined: the statement itself, the body of a
 * PREPARE (its EXECUTE reports the count), or the explained statement of an EXPLAIN without ANALYZE (planned, not
 * run). A write anywhere else is not reported by PostgreSQL (a data-modifying CTE's rows are not in any
 * command tag, nor a write under COPY), so it could not be charged: the walker denies it.
 */
export function placedWriteOf(root: Record<string, unknown>): unknown {
  const kind = Object.keys(root)[0] ?? "";
  const body = root[kind] as Record<string, unknown> | undefined;
  if (!body) return undefined;
  if (WRITE_KINDS.has(kind)) return body;
  if (kind === "PrepareStmt" || (kind === "ExplainStmt" && !explainAnalyzes(body))) {
    const query = body.query as Record<string, unknown> | undefined;
    const queryKind = query ? (Object.keys(query)[0] ?? "") : "";
    if (WRITE_KINDS.has(queryKind)) return query![queryKind];
  }
  return undefined;
}

export const NESTED_WRITE_DENIAL: Denial = {
  rule: "no-data-modifying-cte",
  message:
    "a write inside another statement (a data-modifying WITH, or COPY of a write) is not allowed: PostgreSQL does not report the rows it writes, so they cannot be charged; run the write as a statement of its own",
};

/**
 * EXPLAIN ANALYZE runs the statement it explains: a write would be done and charged per plan line. `EXECUTE`
 * counts as a write here, since the prepared body is not known to the guard.
 */
export function checkExplain(body: Record<string, unknown>): Denial | null {
  if (!explainAnalyzes(body)) return null;
  const query = body.query as Record<string, unknown> | undefined;
  const kind = query ? (Object.keys(query)[0] ?? "") : "";
  if (!WRITE_KINDS.has(kind) && kind !== "ExecuteStmt") return null;
  return {
    rule: "no-explain-analyze-write",
    message:
      "EXPLAIN ANALYZE runs the statement: it is not allowed for a write or an EXECUTE; use EXPLAIN without ANALYZE",
  };
}

/** Whether an EXPLAIN's options turn ANALYZE on; any value PostgreSQL might read as true counts as on. */
function explainAnalyzes(body: Record<string, unknown>): boolean {
  const options = body.options;
  if (!Array.isArray(options)) return false;
  return options.some((option) => {
    const def = (option as { DefElem?: { defname?: unknown; arg?: unknown } }).DefElem;
    return def?.defname === "analyze" && !isFalseOption(def.arg);
  });
}

const FALSE_WORDS = new Set(["false", "off", "no", "0", "f", "n", "of", "fa", "fal", "fals"]);

/**
 * Whether a DefElem argument is surely false for PostgreSQL's defGetBoolean: the integer 0, the boolean false or
 * a false word. Anything else (absent, true, a value it would reject) is not.
 */
export function isFalseOption(arg: unknown): boolean {
  if (typeof arg !== "object" || arg === null) return false;
  const node = arg as {
    Integer?: { ival?: number };
    Boolean?: { boolval?: boolean };
    String?: { sval?: string };
  };
  if (node.Integer) return (node.Integer.ival ?? 0) === 0;
  if (node.Boolean) return node.Boolean.boolval !== true;
  if (node.String) return FALSE_WORDS.has(String(node.String.sval).toLowerCase());
  return false;
}
