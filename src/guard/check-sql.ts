import { tablePriceOf } from "../billing/cost.js";
import { findDenial } from "./policy-walk.js";
import { findRowFolding } from "./row-folding.js";
import { parseStatements } from "./sql-parser.js";
import { standardPolicy } from "./standard-policy.js";
import { describeStatement } from "./statement-metadata.js";
import type { GuardedStatement, GuardPolicy, GuardVerdict } from "./types.js";

/**
 * Checks a SQL string (one or many statements) against `policy` before anything of it runs.
 * Fail closed: a parse error, an empty or comment-only string is `invalid`; a denied statement anywhere
 * (nested ones included) denies the whole string.
 *
 * Synchronous. Throws if `loadGuard()` has not been awaited.
 */
export function checkSql(sql: string, policy: GuardPolicy = standardPolicy): GuardVerdict {
  const parsed = parseStatements(sql);
  if (!parsed.ok) return { kind: "invalid", message: parsed.message };
  const statements: GuardedStatement[] = [];
  for (const { node, sql: text } of parsed.statements) {
    let denial: ReturnType<typeof findDenial>;
    const relations: string[] = [];
    try {
      denial = findDenial(node, policy, relations);
    } catch (error) {
      if (!(error instanceof RangeError)) throw error;
      denial = { rule: "too-complex", message: "statement is nested too deeply to be checked" };
    }
    if (denial) return { kind: "deny", rule: denial.rule, message: denial.message };
    const kind = Object.keys(node)[0] ?? "";
    const body = node[kind] as Record<string, unknown>;
    const described: GuardedStatement = { sql: text, ...describeStatement(kind, body) };
    // What EXECUTE and FETCH read is in a statement prepared or declared earlier: unknown here.
    const known = kind !== "ExecuteStmt" && kind !== "FetchStmt";
    if (known) described.relations = relations;
    const tables = policy.tablePrices;
    if (
      tables &&
      tables.size > 0 &&
      (!known || relations.some((name) => tablePriceOf(tables, name) !== undefined))
    ) {
      described.readsPricedTable = true;
      const folding = known && !policy.allowRowFolding ? findRowFolding(node) : null;
      if (folding) return { kind: "deny", rule: folding.rule, message: folding.message };
    }
    statements.push(described);
  }
  return { kind: "allow", statements };
}
