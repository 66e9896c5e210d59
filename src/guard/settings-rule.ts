import { isUtf8EncodingName } from "./client-encoding.js";
import type { Denial, GuardPolicy } from "./types.js";

/** `SET TRANSACTION ...` and `SET SESSION CHARACTERISTICS AS TRANSACTION ...`: isolation, read only, deferrable. */
const TRANSACTION_MODES = new Set(["TRANSACTION", "SESSION CHARACTERISTICS"]);

/**
 * Checks a VariableSetStmt (SET, SET LOCAL, SET ... TO DEFAULT, RESET, RESET ALL) against the policy's
 * settable parameters. client_encoding may only be set to UTF8: with a client-only encoding such as
 * SJIS or BIG5 the server would split the bytes into characters differently from the guard, which reads
 * the text as UTF-8.
 */
export function checkSetting(set: Record<string, unknown>, policy: GuardPolicy): Denial | null {
  const kind = set.kind;
  const name = typeof set.name === "string" ? set.name : "";
  if (kind === "VAR_RESET_ALL") return forbidden("RESET ALL is not allowed");
  if (kind === "VAR_SET_MULTI") {
    return TRANSACTION_MODES.has(name) ? null : forbidden(`SET ${name} is not allowed`);
  }
  const parameter = name.toLowerCase();
  // pgtoll's own settings are the proxy's to apply (it refuses those an agent may not change), for the session.
  if (parameter.startsWith("pgtoll.")) {
    return set.is_local === true ? forbidden(`SET LOCAL ${parameter} is not supported: use SET`) : null;
  }
  if (!policy.settableParameters.has(parameter)) {
    return forbidden(`parameter "${parameter}" cannot be changed`);
  }
  if (parameter === "client_encoding" && !(kind === "VAR_SET_VALUE" && isUtf8(set.args))) {
    return forbidden("client_encoding can only be set to UTF8");
  }
  return null;
}

function isUtf8(args: unknown): boolean {
  if (!Array.isArray(args) || args.length !== 1) return false;
  const value = args[0]?.A_Const?.sval?.sval;
  return typeof value === "string" && isUtf8EncodingName(value);
}

function forbidden(message: string): Denial {
  return { rule: "forbidden-setting", message };
}
