import { checkStatisticsFunction } from "./column-statistics.js";
import { isForbiddenFunction } from "./forbidden-functions.js";
import { checkActivityFunction } from "./other-sessions.js";
import { relationName } from "./relation-names.js";
import { checkCurrentSetting, checkRelationRead, ROW_LOCK_DENIAL } from "./sensitive-reads.js";
import { checkStatement } from "./statement-rules.js";
import type { Denial, GuardPolicy } from "./types.js";
import { isWriteKind, NESTED_WRITE_DENIAL, placedWriteOf } from "./write-placement.js";

/**
 * Walks a whole statement tree (iteratively, so no input can exhaust the stack) and applies the policy
 * to every statement node (`...Stmt`, wherever it sits: CTE, subquery, EXPLAIN, PREPARE, DECLARE,
 * COPY) and every function call. Returns the first denial, or null.
 *
 * Parse nodes appear as `{ NodeName: {...fields} }` with PascalCase names; fields are lower/camel case.
 * Struct-typed fields (a RangeVar relation, a UNION's larg/rarg) are inlined without the wrapper, so
 * the SELECT INTO check looks for the `intoClause` field itself rather than at SelectStmt nodes.
 *
 * `relations`, when given, receives the name of every relation the statement names (read in FROM, JOIN, TABLE or
 * COPY, or the target of a write), for per-table prices.
 */
export function findDenial(
  root: Record<string, unknown>,
  policy: GuardPolicy,
  relations?: string[],
): Denial | null {
  const placedWrite = placedWriteOf(root);
  const stack: unknown[] = [root];
  while (stack.length > 0) {
    const value = stack.pop();
    if (typeof value !== "object" || value === null) continue;
    if (Array.isArray(value)) {
      for (const item of value) if (typeof item === "object" && item !== null) stack.push(item);
      continue;
    }
    const node = value as Record<string, unknown>;
    for (const key in node) {
      const child = node[key];
      if (typeof child !== "object" || child === null) continue;
      const first = key.charCodeAt(0);
      if (first >= 65 && first <= 90 && !Array.isArray(child)) {
        if (isWriteKind(key) && child !== placedWrite) return NESTED_WRITE_DENIAL;
        if (key === "RangeVar" && relations) addRelation(relations, child as Record<string, unknown>);
        const denial = checkNode(key, child as Record<string, unknown>, policy);
        if (denial) return denial;
      } else if (key === "relation" && relations && !Array.isArray(child)) {
        // A write's or COPY's target, inlined without the RangeVar wrapper.
        addRelation(relations, child as Record<string, unknown>);
      } else if (key === "intoClause") {
        return { rule: "no-select-into", message: "SELECT INTO creates a table and is not allowed" };
      }
      stack.push(child);
    }
  }
  return null;
}

function addRelation(relations: string[], relation: Record<string, unknown>): void {
  const name = relationName(relation);
  if (name !== null && !relations.includes(name)) relations.push(name);
}

function checkNode(key: string, body: Record<string, unknown>, policy: GuardPolicy): Denial | null {
  if (key === "FuncCall") return checkFunctionCall(body, policy);
  if (key === "RangeVar") return checkRelationRead(body);
  if (key === "LockingClause") return ROW_LOCK_DENIAL;
  if (key.endsWith("Stmt")) return checkStatement(key, body, policy);
  return null;
}

function checkFunctionCall(call: Record<string, unknown>, policy: GuardPolicy): Denial | null {
  const names = call.funcname;
  if (!Array.isArray(names) || names.length === 0) return null;
  const last = names[names.length - 1]?.String?.sval;
  if (typeof last !== "string") return null;
  if (last.toLowerCase() === "current_setting") return checkCurrentSetting(call);
  if (isForbiddenFunction(last, policy))
    return { rule: "forbidden-function", message: `function ${last}() is not allowed` };
  return checkActivityFunction(last.toLowerCase()) ?? checkStatisticsFunction(last.toLowerCase());
}
