import { FORBIDDEN_FUNCTION_PREFIXES, FORBIDDEN_FUNCTIONS } from "./forbidden-functions.js";
import { SETTABLE_PARAMETERS } from "./settable-parameters.js";
import type { GuardPolicy } from "./types.js";

/** The default policy: the contract of `cases.jsonl` (rules in src/guard/README.md). */
export const standardPolicy: GuardPolicy = Object.freeze({
  name: "standard",
  allowCopyOut: true,
  settableParameters: new Set(SETTABLE_PARAMETERS),
  forbiddenFunctions: new Set(FORBIDDEN_FUNCTIONS),
  forbiddenFunctionPrefixes: FORBIDDEN_FUNCTION_PREFIXES,
});
