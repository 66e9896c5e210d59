export { checkSql } from "./check-sql.js";
export { isUtf8EncodingName } from "./client-encoding.js";
export {
  FORBIDDEN_FUNCTION_PREFIXES,
  FORBIDDEN_FUNCTIONS,
  isForbiddenFunction,
} from "./forbidden-functions.js";
export { type LiteralMask, maskLiterals } from "./literal-mask.js";
export {
  findReadOnlySettingViolation,
  findReadOnlyViolation,
  isClientOnlyEncoding,
} from "./read-only-rule.js";
export { SETTABLE_PARAMETERS } from "./settable-parameters.js";
export { loadGuard } from "./sql-parser.js";
export { standardPolicy } from "./standard-policy.js";
export type { Denial, GuardedStatement, GuardPolicy, GuardVerdict } from "./types.js";
export { VerdictShapes } from "./verdict-shapes.js";
