import {
  checkSql,
  type GuardPolicy,
  type GuardVerdict,
  maskLiterals,
  VerdictShapes,
} from "../guard/index.js";

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
    if (sql.length <= 8192) cache.set(sql, verdict);
    if (mask) shapes.learn(sql, mask, verdict);
    return verdict;
  };
}
