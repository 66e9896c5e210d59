import type { Denial, GuardPolicy } from "./types.js";

/**
 * COPY is allowed only as `COPY table|(query) TO STDOUT` and only when `policy.allowCopyOut`.
 * The query of `COPY (query) TO STDOUT` is checked by the walker like any nested statement.
 * COPY FROM STDIN writes rows with no WHERE-style bound, and files and programs are the server's.
 */
export function checkCopy(copy: Record<string, unknown>, policy: GuardPolicy): Denial | null {
  if (copy.is_program === true) {
    return { rule: "no-copy-program", message: "COPY with PROGRAM is not allowed" };
  }
  if (typeof copy.filename === "string") {
    return { rule: "no-copy-file", message: "COPY to or from a server file is not allowed" };
  }
  if (copy.is_from === true) {
    return { rule: "no-copy-from", message: "COPY FROM is not allowed; use INSERT" };
  }
  if (!policy.allowCopyOut) {
    return { rule: "no-copy-out", message: `COPY TO STDOUT is not allowed by policy "${policy.name}"` };
  }
  return null;
}
