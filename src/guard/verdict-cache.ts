import {
  checkSql,
  findReadOnlyViolation,
  type GuardPolicy,
  type GuardVerdict,
  maskLiterals,
  VerdictShapes,
} from "./index.js";

/**
 * Longest text remembered: agents may send texts of megabytes, and a full map of them would be gigabytes. Longer
 * texts are checked every time, which costs little next to running them.
 */
const MAX_CACHED_TEXT = 8192;

/**
 * Memoises guard verdicts. Drivers and ORMs send the same statements over and over, and a verdict depends only
 * on the text and the policy: the exact text is looked up first. Simple-protocol clients inline their values
 * (`... WHERE id = 42`), so every text differs: an allowed text also teaches its literal mask, and later texts
 * of that mask get the same verdict without being parsed (see guard/verdict-shapes.ts for why that is sound).
 * Bounded: each map starts over when full.
 */
export function createVerdictCache(policy?: GuardPolicy, maxEntries = 10_000): (sql: string) => GuardVerdict {
  const cache = new Map<string, GuardVerdict>();
  const shapes = new VerdictShapes(maxEntries);
  return (sql) => {
    const cached = cache.get(sql);
    if (cached) return cached;
    const mask = maskLiterals(sql);
    if (mask) {
      const shaped = shapes.lookup(sql, mask);
      if (shaped) return shaped;
    }
    const verdict = checkSql(sql, policy);
    if (cache.size >= maxEntries) cache.clear();
    if (sql.length <= MAX_CACHED_TEXT) cache.set(sql, verdict);
    if (mask) shapes.learn(sql, mask, verdict);
    return verdict;
  };
}

/**
 * The guard of an agent of a read-only provider: `check`'s verdict and, for what it allows, the read-only rule
 * (guard/read-only-rule.ts: nothing may switch the session's transactions to read-write; PostgreSQL itself
 * refuses the writes). Memoised by exact text, bounded like {@link createVerdictCache}: the rule parses the text
 * again, and `check`'s literal shapes do not carry over, since `SET transaction_read_only = 'on'` and `= 'off'`
 * differ only in a literal.
 */
export function withReadOnlyVerdicts(
  check: (sql: string) => GuardVerdict,
  maxEntries = 10_000,
): (sql: string) => GuardVerdict {
  const cache = new Map<string, GuardVerdict>();
  return (sql) => {
    const cached = cache.get(sql);
    if (cached) return cached;
    let verdict = check(sql);
    if (verdict.kind === "allow") {
      const denial = findReadOnlyViolation(sql);
      if (denial) verdict = { kind: "deny", rule: denial.rule, message: denial.message };
    }
    if (cache.size >= maxEntries) cache.clear();
    if (sql.length <= MAX_CACHED_TEXT) cache.set(sql, verdict);
    return verdict;
  };
}
