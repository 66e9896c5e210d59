import type { Denial } from "./types.js";

/**
 * Aggregates that fold the values of many rows into one value (by the last segment of their name, lower case,
 * whatever the schema, windowed or not). A priced table is charged by the rows a statement returns, so one of
 * these would hand over a whole table for the price of one row.
 */
export const FOLDING_AGGREGATES: ReadonlySet<string> = new Set([
  "string_agg",
  "array_agg",
  "json_agg",
  "json_agg_strict",
  "jsonb_agg",
  "jsonb_agg_strict",
  "json_object_agg",
  "json_object_agg_strict",
  "json_object_agg_unique",
  "json_object_agg_unique_strict",
  "jsonb_object_agg",
  "jsonb_object_agg_strict",
  "jsonb_object_agg_unique",
  "jsonb_object_agg_unique_strict",
  "json_arrayagg",
  "json_objectagg",
  "xmlagg",
  "range_agg",
  "range_intersect_agg",
]);

/** `JSON_ARRAYAGG(...)`, `JSON_OBJECTAGG(...)` and `JSON_ARRAY(subquery)`: SQL/JSON syntax, not function calls. */
const FOLDING_SYNTAX: ReadonlyMap<string, string> = new Map([
  ["JsonArrayAgg", "JSON_ARRAYAGG"],
  ["JsonObjectAgg", "JSON_OBJECTAGG"],
  ["JsonArrayQueryConstructor", "JSON_ARRAY(subquery)"],
]);

/** Clauses whose values only decide which rows are returned: a subquery there puts no value in the result. */
const FILTER_FIELDS = new Set(["whereClause", "havingClause", "quals"]);

function folding(what: string): Denial {
  return {
    rule: "priced-table-folding",
    message: `${what} is not allowed in a statement that reads a priced table: it would fold many rows into one, which is charged as one row`,
  };
}

/**
 * What in a statement (which reads a priced table) folds many rows into one row: a folding aggregate or SQL/JSON
 * constructor anywhere, `ARRAY(subquery)` anywhere, a scalar subquery (`(SELECT ...)`, `(a, b) = (SELECT ...)`)
 * anywhere but in a WHERE, HAVING or JOIN condition (several of them in a select list give many rows' values in
 * one row), and `WITH RECURSIVE` (a recursive term can concatenate row after row into one value). Walked
 * iteratively, like policy-walk.ts.
 */
export function findRowFolding(root: Record<string, unknown>): Denial | null {
  const stack: [unknown, boolean][] = [[root, false]];
  while (stack.length > 0) {
    const [value, inFilter] = stack.pop()!;
    if (typeof value !== "object" || value === null) continue;
    if (Array.isArray(value)) {
      for (const item of value) if (typeof item === "object" && item !== null) stack.push([item, inFilter]);
      continue;
    }
    const node = value as Record<string, unknown>;
    for (const key in node) {
      const child = node[key];
      if (typeof child !== "object" || child === null) continue;
      const denial = foldingOf(key, child as Record<string, unknown>, inFilter);
      if (denial) return denial;
      stack.push([child, inFilter || FILTER_FIELDS.has(key)]);
    }
  }
  return null;
}

function foldingOf(key: string, body: Record<string, unknown>, inFilter: boolean): Denial | null {
  if (key === "FuncCall") {
    const names = body.funcname as { String?: { sval?: unknown } }[] | undefined;
    const last = names?.[names.length - 1]?.String?.sval;
    if (typeof last === "string" && FOLDING_AGGREGATES.has(last.toLowerCase())) return folding(`${last}()`);
    return null;
  }
  const syntax = FOLDING_SYNTAX.get(key);
  if (syntax) return folding(syntax);
  if (key === "SubLink") {
    const type = body.subLinkType;
    if (type === "ARRAY_SUBLINK") return folding("ARRAY(subquery)");
    if (!inFilter && (type === "EXPR_SUBLINK" || type === "MULTIEXPR_SUBLINK"))
      return folding("a scalar subquery outside WHERE, HAVING and JOIN conditions");
    return null;
  }
  if (key === "withClause" && body.recursive === true) return folding("WITH RECURSIVE");
  return null;
}
