import { parseSync, scanSync } from "libpg-query";
import { INTEGER_TAG, type LiteralMask } from "./literal-mask.js";
import { readsConstantArguments } from "./sensitive-reads.js";
import { unreadableText } from "./sql-parser.js";
import type { GuardedStatement, GuardVerdict } from "./types.js";

/**
 * Parse nodes inside which the policy reads constant values: settings-rule.ts reads the value of
 * `SET client_encoding` / `SET NAMES`, and sensitive-reads.ts the name given to `current_setting()` (a
 * FuncCall, checked by `readsConstantArguments`). A text holding one is never generalised. Keep this in step
 * with every rule that reads an `A_Const`.
 */
const VALUE_READING_NODES = new Set(["VariableSetStmt"]);

/** A position of a statement boundary: this many masked literals before it, then `offset` characters. */
interface Boundary {
  spansBefore: number;
  offset: number;
}

interface LearnedStatement {
  meta: Omit<GuardedStatement, "sql">;
  start: Boundary;
  end: Boundary;
}

/**
 * Allow verdicts by literal mask: once the guard has allowed one text of a mask, every other text of that
 * mask gets the same verdict without being parsed, each statement's `sql` sliced from its own text.
 *
 * Why that is sound. Texts of one mask are the same characters except inside masked literals, each of which
 * `maskLiterals` only accepts where it is exactly one token of a fixed type (ICONST or SCONST), so
 * PostgreSQL's lexer gives both the same token sequence, values of those tokens aside, and its LALR parser
 * (driven by token types) runs the same grammar actions. A shape is learned only when, in the text the guard
 * checked, each masked literal is confirmed by libpg-query's own scanner as that token and is where an
 * `A_Const` node begins: its grammar action only stores the value in that node (PostgreSQL's gram.y: no
 * such action also inspects the value, except `SET NAMES`, which is a VariableSetStmt). The trees then
 * differ only in `A_Const` values and locations, which the policy never reads outside VALUE_READING_NODES.
 * Only `allow` verdicts are learned: parse error messages can quote literals.
 */
export class VerdictShapes {
  /** null: this mask was looked at and is not generalised; its texts go to the guard. */
  readonly #shapes = new Map<string, LearnedStatement[] | null>();

  /** @param maxEntries shapes kept; when full, it starts over. */
  constructor(private readonly maxEntries = 10_000) {}

  get size(): number {
    return this.#shapes.size;
  }

  /** The verdict of `sql` from a learned shape of its mask, or undefined when none is learned. */
  lookup(sql: string, mask: LiteralMask): GuardVerdict | undefined {
    const learned = this.#shapes.get(mask.key);
    if (!learned || unreadableText(sql) !== null) return undefined;
    const { spans } = mask;
    const statements = new Array<GuardedStatement>(learned.length);
    for (let i = 0; i < learned.length; i++) {
      const { meta, start, end } = learned[i]!;
      statements[i] = { sql: sql.slice(positionOf(start, spans), positionOf(end, spans)).trim(), ...meta };
    }
    return { kind: "allow", statements };
  }

  /** Learns the shape of `sql`, which the guard has just judged `verdict`. */
  learn(sql: string, mask: LiteralMask, verdict: GuardVerdict): void {
    if (verdict.kind !== "allow" || this.#shapes.has(mask.key)) return;
    if (this.#shapes.size >= this.maxEntries) this.#shapes.clear();
    this.#shapes.set(mask.key, shapeOf(sql, mask, verdict.statements));
  }
}

function shapeOf(
  sql: string,
  mask: LiteralMask,
  statements: readonly GuardedStatement[],
): LearnedStatement[] | null {
  let stmts: { stmt?: unknown; stmt_location?: number; stmt_len?: number }[];
  let tokens: { start: number; end: number; tokenName: string }[];
  try {
    stmts = parseSync(sql).stmts ?? [];
    tokens = scanSync(sql).tokens;
  } catch {
    return null;
  }
  if (stmts.length !== statements.length) return null;
  const charAt = byteToCharIndex(sql);
  const constantBytes = new Set<number>();
  for (const { stmt } of stmts) {
    if (!collectConstants(stmt, constantBytes)) return null;
  }
  const constants = new Set([...constantBytes].map(charAt));
  const tokenAt = new Map<number, { end: number; name: string }>();
  for (const token of tokens)
    tokenAt.set(charAt(token.start), { end: charAt(token.end), name: token.tokenName });
  const { spans } = mask;
  for (let k = 0; k < spans.length; k += 2) {
    const start = spans[k]!;
    const token = tokenAt.get(start);
    const expected = tagAt(mask, k / 2) === INTEGER_TAG ? "ICONST" : "SCONST";
    if (!token || token.end !== spans[k + 1] || token.name !== expected) return null;
    if (!constants.has(start)) return null;
  }
  const byteLength = Buffer.byteLength(sql, "utf8");
  const learned: LearnedStatement[] = [];
  for (let i = 0; i < stmts.length; i++) {
    const raw = stmts[i]!;
    const from = raw.stmt_location ?? 0;
    const start = charAt(from);
    const end = charAt(raw.stmt_len ? from + raw.stmt_len : byteLength);
    const { sql: text, ...meta } = statements[i]!;
    if (sql.slice(start, end).trim() !== text) return null;
    const startBoundary = boundaryOf(start, spans);
    const endBoundary = boundaryOf(end, spans);
    if (!startBoundary || !endBoundary) return null;
    // The mask holds the text with each literal replaced by its tag: no value of any statement.
    learned.push({
      meta: { ...meta, shape: `${mask.key}\u0001${i}` },
      start: startBoundary,
      end: endBoundary,
    });
  }
  return learned;
}

/** The tag of the `index`-th masked literal, read from the key (tags are the only NULs in it). */
function tagAt(mask: LiteralMask, index: number): string {
  let at = -1;
  for (let n = 0; n <= index; n++) at = mask.key.indexOf("\0", at + 1);
  return mask.key.slice(at, at + 2);
}

/** Collects the (byte) locations of `A_Const` nodes; false when the tree holds a VALUE_READING_NODES node. */
function collectConstants(root: unknown, into: Set<number>): boolean {
  const stack: unknown[] = [root];
  while (stack.length > 0) {
    const value = stack.pop();
    if (typeof value !== "object" || value === null) continue;
    if (Array.isArray(value)) {
      for (const item of value) stack.push(item);
      continue;
    }
    for (const [key, child] of Object.entries(value as Record<string, unknown>)) {
      if (VALUE_READING_NODES.has(key)) return false;
      if (key === "FuncCall" && readsConstantArguments(child)) return false;
      if (key === "A_Const" && typeof child === "object" && child !== null) {
        const location = (child as { location?: unknown }).location;
        if (typeof location === "number") into.add(location);
      }
      stack.push(child);
    }
  }
  return true;
}

/** The position in a text of mask `spans` of a boundary learned from another text of the same mask. */
function positionOf({ spansBefore, offset }: Boundary, spans: readonly number[]): number {
  return spansBefore === 0 ? offset : spans[spansBefore * 2 - 1]! + offset;
}

/** Where a character position lies relative to the masked literals; null when it is inside one. */
function boundaryOf(position: number, spans: readonly number[]): Boundary | null {
  let spansBefore = 0;
  while (spansBefore * 2 < spans.length && spans[spansBefore * 2 + 1]! <= position) spansBefore++;
  if (spansBefore * 2 < spans.length && spans[spansBefore * 2]! < position) return null;
  const offset = spansBefore === 0 ? position : position - spans[spansBefore * 2 - 1]!;
  return { spansBefore, offset };
}

/** Maps libpg-query's byte offsets into the UTF-8 text to UTF-16 indices of `sql`. */
function byteToCharIndex(sql: string): (byte: number) => number {
  if (!/[\u0080-\uffff]/.test(sql)) return (byte) => byte;
  const chars: number[] = [];
  for (let i = 0; i < sql.length; i++) {
    const c = sql.charCodeAt(i);
    const units = c >= 0xd800 && c <= 0xdbff ? 2 : 1;
    const bytes = c < 0x80 ? 1 : c < 0x800 ? 2 : units === 2 ? 4 : 3;
    for (let b = 0; b < bytes; b++) chars.push(i);
    i += units - 1;
  }
  chars.push(sql.length);
  return (byte) => chars[byte] ?? sql.length;
}
