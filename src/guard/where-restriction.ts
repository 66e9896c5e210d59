/**
 * Does an UPDATE/DELETE WHERE clause restrict the rows of the target table?
 *
 * PostgreSQL treats a qual that references no column of the query level as a pseudo-constant: it is
 * evaluated once and then keeps every row or none (`true`, `1 = 1`, `'a' = 'a'`, `NOT false`, `$1`,
 * `now() > '2000-01-01'`, `EXISTS (SELECT 1 FROM t)`). So a WHERE restricts rows only when it
 * references the target: an unqualified column at the statement's level (assumed to be the target's),
 * a column qualified with the target's name (its alias when it has one), a correlated column inside a
 * subquery qualified the same way and not shadowed by the subquery's own FROM, or `CURRENT OF`.
 * AND restricts when any operand does; OR only when every operand does; NOT when its operand does.
 * This is a guard rail against unbounded writes, not a proof: `WHERE id = id` passes.
 */
export function whereRestrictsTarget(where: unknown, targetName: string): boolean {
  return restricts(where, targetName, 0);
}

const MAX_DEPTH = 2000;

function restricts(expr: unknown, target: string, depth: number): boolean {
  if (depth > MAX_DEPTH) throw new RangeError("WHERE clause nested too deeply");
  if (!isObject(expr)) return false;
  const bool = expr.BoolExpr;
  if (isObject(bool)) {
    const args = Array.isArray(bool.args) ? bool.args : [];
    if (bool.boolop === "AND_EXPR") return args.some((a) => restricts(a, target, depth + 1));
    if (bool.boolop === "OR_EXPR")
      return args.length > 0 && args.every((a) => restricts(a, target, depth + 1));
    if (bool.boolop === "NOT_EXPR") return args.length === 1 && restricts(args[0], target, depth + 1);
    return false;
  }
  return mentionsTarget(expr, target, false, depth);
}

/** Searches an expression for a reference to the target; `nested` once inside a subquery. */
function mentionsTarget(value: unknown, target: string, nested: boolean, depth: number): boolean {
  if (depth > MAX_DEPTH) throw new RangeError("WHERE clause nested too deeply");
  if (Array.isArray(value)) return value.some((v) => mentionsTarget(v, target, nested, depth + 1));
  if (!isObject(value)) return false;
  for (const key in value) {
    const child = value[key];
    if (key === "ColumnRef") {
      if (isObject(child) && columnRefMentions(child, target, nested)) return true;
    } else if (key === "CurrentOfExpr") {
      return true;
    } else if (key === "SelectStmt") {
      if (isObject(child) && selectMentions(child, target, depth + 1)) return true;
    } else if (mentionsTarget(child, target, nested, depth + 1)) {
      return true;
    }
  }
  return false;
}

function selectMentions(select: Record<string, unknown>, target: string, depth: number): boolean {
  if (depth > MAX_DEPTH) throw new RangeError("WHERE clause nested too deeply");
  if (fromDefines(select.fromClause, target, depth)) return false; // shadowed: the name is the subquery's own
  for (const key in select) {
    const child = select[key];
    if (key === "larg" || key === "rarg") {
      // Set-operation branches are inline SELECT bodies with their own FROM.
      if (isObject(child) && selectMentions(child, target, depth + 1)) return true;
    } else if (mentionsTarget(child, target, true, depth + 1)) {
      return true;
    }
  }
  return false;
}

function columnRefMentions(ref: Record<string, unknown>, target: string, nested: boolean): boolean {
  const fields = Array.isArray(ref.fields) ? ref.fields : [];
  if (fields.length === 1) return !nested; // inside a subquery a bare name resolves there first
  for (let i = 0; i < fields.length - 1; i++) {
    if (stringField(fields[i]) === target) return true; // rel.col, schema.rel.col
  }
  return false;
}

/** True when a FROM list introduces `name` (a relation without alias, an alias, a join alias). */
function fromDefines(from: unknown, name: string, depth: number): boolean {
  if (depth > MAX_DEPTH) throw new RangeError("FROM clause nested too deeply");
  if (!Array.isArray(from)) return false;
  for (const item of from) {
    if (!isObject(item)) continue;
    for (const key in item) {
      const node = item[key];
      if (!isObject(node)) continue;
      if (aliasName(node.alias) === name) return true;
      if (key === "RangeVar" && node.alias === undefined && node.relname === name) return true;
      if (key === "JoinExpr" && fromDefines([node.larg, node.rarg], name, depth + 1)) return true;
    }
  }
  return false;
}

/** The name a target relation is referred to by: its alias, else its relation name. */
export function targetNameOf(relation: unknown): string {
  if (!isObject(relation)) return "";
  return aliasName(relation.alias) ?? (typeof relation.relname === "string" ? relation.relname : "");
}

function aliasName(alias: unknown): string | undefined {
  return isObject(alias) && typeof alias.aliasname === "string" ? alias.aliasname : undefined;
}

function stringField(field: unknown): string | undefined {
  if (!isObject(field) || !isObject(field.String)) return undefined;
  const sval = field.String.sval;
  return typeof sval === "string" ? sval : undefined;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null;
}
