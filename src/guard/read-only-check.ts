import { findReadOnlyViolation } from "./read-only-rule.js";
import type { GuardVerdict } from "./types.js";

/** Texts remembered per check; when full it starts over (the guard's own cache sits below it). */
const MAX_ENTRIES = 10_000;

/**
 * The guard for an agent of a read-only provider: `check`'s verdict, and for what it allows, the read-only
 * rule too (nothing may switch the session's transactions to read-write; PostgreSQL refuses the writes
 * themselves). Verdicts are remembered by text, since the rule parses again.
 */
export function withReadOnlyRule(check: (sql: string) => GuardVerdict): (sql: string) => GuardVerdict {
  const verdicts = new Map<string, GuardVerdict>();
  return (sql) => {
    const known = verdicts.get(sql);
    if (known) return known;
    let verdict = check(sql);
    if (verdict.kind === "allow") {
      const denial = findReadOnlyViolation(sql);
      if (denial) verdict = { kind: "deny", ...denial };
    }
    if (verdicts.size >= MAX_ENTRIES) verdicts.clear();
    verdicts.set(sql, verdict);
    return verdict;
  };
}
