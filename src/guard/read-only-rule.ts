import { parseStatements } from "./sql-parser.js";
import type { Denial } from "./types.js";

/** Settings that would make a read-only session's transactions read-write. */
const READ_ONLY_SETTINGS = new Set(["transaction_read_only", "default_transaction_read_only"]);

/**
 * Client-only encodings: a second byte of a multibyte character can be an ASCII quote or backslash, so the
 * server would split the text differently from this parser (PostgreSQL's docs call them client-only). Names
 * are compared as PostgreSQL does, lower case without punctuation.
 */
const CLIENT_ONLY_ENCODINGS = new Set([
  "big5",
  "win950",
  "windows950",
  "gbk",
  "win936",
  "windows936",
  "cp936",
  "gb18030",
  "johab",
  "sjis",
  "shiftjis",
  "mskanji",
  "win932",
  "windows932",
  "cp932",
  "shiftjis2004",
  "uhc",
  "win949",
  "windows949",
  "cp949",
]);

/** Whether a client may use `encoding` on a session whose SQL the proxy must read (see CLIENT_ONLY_ENCODINGS). */
export function isClientOnlyEncoding(encoding: string): boolean {
  return CLIENT_ONLY_ENCODINGS.has(encoding.toLowerCase().replace(/[^a-z0-9]/g, ""));
}

/**
 * The rule of a read-only session (a read-only endpoint, or an agent of a provider that declared its data
 * read-only), whose upstream session starts with `default_transaction_read_only=on` so
 * that PostgreSQL itself refuses every write (functions, sequences and COPY FROM included). What must not
 * reach it is a way to switch that off: SET / SET LOCAL of `transaction_read_only` or
 * `default_transaction_read_only` to anything but on (RESET and SET ... TO DEFAULT go back to the connect-time
 * value, on), `BEGIN` / `START TRANSACTION` / `SET TRANSACTION` / `SET SESSION CHARACTERISTICS` with
 * READ WRITE, `set_config()` anywhere, DO blocks (their PL/pgSQL body could do either), and a client-only
 * encoding (it would hide the rest from this parser). Returns the denial, or null.
 *
 * SQL that does not parse is not this rule's business: the server answers it with its own syntax error.
 */
export function findReadOnlyViolation(sql: string): Denial | null {
  const parsed = parseStatements(sql);
  if (!parsed.ok) return null;
  for (const { node } of parsed.statements) {
    const denial = walk(node);
    if (denial) return denial;
  }
  return null;
}

function walk(root: unknown): Denial | null {
  const stack: unknown[] = [root];
  while (stack.length > 0) {
    const value = stack.pop();
    if (typeof value !== "object" || value === null) continue;
    if (Array.isArray(value)) {
      stack.push(...value);
      continue;
    }
    for (const [key, child] of Object.entries(value as Record<string, unknown>)) {
      if (typeof child !== "object" || child === null) continue;
      const denial = checkNode(key, child as Record<string, unknown>);
      if (denial) return denial;
      stack.push(child);
    }
  }
  return null;
}

function checkNode(key: string, body: Record<string, unknown>): Denial | null {
  switch (key) {
    case "VariableSetStmt":
      return checkSetting(body);
    case "TransactionStmt":
      return setsReadWrite(body.options) ? readWrite("BEGIN READ WRITE") : null;
    case "FuncCall":
      return lastName(body.funcname) === "set_config"
        ? deny("function set_config() is not allowed in a read-only session")
        : null;
    case "DoStmt":
      return deny("DO blocks are not allowed in a read-only session");
    default:
      return null;
  }
}

function checkSetting(set: Record<string, unknown>): Denial | null {
  if (set.kind === "VAR_SET_MULTI")
    return setsReadWrite(set.args) ? readWrite(`SET ${set.name} READ WRITE`) : null;
  if (set.kind !== "VAR_SET_VALUE" || typeof set.name !== "string") return null;
  return findReadOnlySettingViolation(set.name, constantText(set.args));
}

/**
 * The read-only rule for one setting, from a SET or from the startup message (`value` null when it is not a
 * constant): the read-only switches may only be on, the encoding must not be client-only, and
 * standard_conforming_strings must stay on (off, backslashes would end string literals where this parser
 * does not end them).
 */
export function findReadOnlySettingViolation(name: string, value: string | null): Denial | null {
  const parameter = name.toLowerCase();
  if (READ_ONLY_SETTINGS.has(parameter) && !isOn(value)) return readWrite(`SET ${parameter}`);
  if (parameter === "standard_conforming_strings" && !isOn(value))
    return deny("standard_conforming_strings must stay on in a read-only session");
  if (parameter === "client_encoding" && (value === null || isClientOnlyEncoding(value)))
    return deny(`client_encoding ${value ?? "(computed)"} is not allowed in a read-only session`);
  return null;
}

/** A DefElem list (BEGIN / SET TRANSACTION options) asking for `transaction_read_only` false. */
function setsReadWrite(options: unknown): boolean {
  if (!Array.isArray(options)) return false;
  return options.some((option) => {
    const def = option?.DefElem;
    return def?.defname === "transaction_read_only" && !def.arg?.A_Const?.ival?.ival;
  });
}

function isOn(value: string | null): boolean {
  return value !== null && ["on", "true", "yes", "1", "t", "y"].includes(value.toLowerCase());
}

function constantText(args: unknown): string | null {
  if (!Array.isArray(args) || args.length !== 1) return null;
  const constant = args[0]?.A_Const;
  if (!constant) return null;
  if (typeof constant.sval?.sval === "string") return constant.sval.sval;
  if (constant.ival) return String(constant.ival.ival ?? 0);
  if (constant.boolval) return constant.boolval.boolval ? "on" : "off";
  return null;
}

function lastName(names: unknown): string | undefined {
  if (!Array.isArray(names) || names.length === 0) return undefined;
  const last = names[names.length - 1]?.String?.sval;
  return typeof last === "string" ? last.toLowerCase() : undefined;
}

function readWrite(what: string): Denial {
  return deny(`${what} is not allowed: this session is read-only`);
}

function deny(message: string): Denial {
  return { rule: "read-only-session", message };
}
