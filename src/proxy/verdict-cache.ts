import { checkSql, type GuardPolicy, type GuardVerdict } from "../guard/index.js";

/**
 * Memoises guard verdicts by SQL text: drivers and ORMs send the same statements over and over (prepared or
 * not), and a verdict depends only on the text and the policy. Bounded: when full, it starts over.
 */
export function createVerdictCache(policy?: GuardPolicy, maxEntries = 10_000): (sql: string) => GuardVerdict {
  const cache = new Map<string, GuardVerdict>();
  return (sql) => {
    let verdict = cache.get(sql);
    if (!verdict) {
      verdict = checkSql(sql, policy);
      if (cache.size >= maxEntries) cache.clear();
      if (sql.length <= 8192) cache.set(sql, verdict);
    }
    return verdict;
  };
}
