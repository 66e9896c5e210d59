import type { GuardPolicy, GuardVerdict } from "./types.js";
import { createVerdictCache, withReadOnlyVerdicts } from "./verdict-cache.js";

/** What of a provider's pricing the guard's verdicts depend on. */
export interface GuardedPricing {
  /** Agents' sessions are read-only: the read-only rule applies too (read-only-rule.ts). */
  readOnly: boolean;
  /** The provider's table prices: statements reading those tables may not fold rows (row-folding.ts). */
  tablePricesMicroPer1000Rows?: ReadonlyMap<string, bigint>;
  /** Statements reading a priced table may fold rows all the same. */
  allowRowFolding?: boolean;
}

/** Distinct sets of priced tables remembered; past it the memo starts over (each set keeps its own verdicts). */
const MAX_POLICIES = 256;
/** Verdicts remembered per priced policy: fewer than the shared cache's, as there can be many such policies. */
const PRICED_VERDICTS = 2000;

/**
 * The guard of each provider's agents, memoised: a provider without table prices gets the shared `check` (or its
 * read-only form), a provider with table prices a verdict cache of its own policy, shared by every provider that
 * prices the same table names with the same allowance. A verdict depends only on the text and the policy, so
 * the surfaces (wire proxy, REST, MCP through the proxy) refuse the same statements with the same rules.
 */
export class ProviderGuards {
  readonly #readOnly: (sql: string) => GuardVerdict;
  readonly #priced = new Map<string, (sql: string) => GuardVerdict>();

  constructor(
    /** The policy the shared `check` applies; priced policies are built from it. */
    private readonly base: GuardPolicy,
    /** The shared, memoised guard of `base`. */
    private readonly check: (sql: string) => GuardVerdict,
  ) {
    this.#readOnly = withReadOnlyVerdicts(check);
  }

  /** The guard for agents of a provider priced as `pricing`. */
  checkFor(pricing: GuardedPricing): (sql: string) => GuardVerdict {
    const tables = pricing.tablePricesMicroPer1000Rows;
    if (!tables || tables.size === 0) return pricing.readOnly ? this.#readOnly : this.check;
    const allow = pricing.allowRowFolding === true;
    const key = JSON.stringify([pricing.readOnly, allow, [...tables.keys()].sort()]);
    let check = this.#priced.get(key);
    if (!check) {
      const policy: GuardPolicy = { ...this.base, tablePrices: tables, allowRowFolding: allow };
      check = createVerdictCache(policy, PRICED_VERDICTS);
      if (pricing.readOnly) check = withReadOnlyVerdicts(check, PRICED_VERDICTS);
      if (this.#priced.size >= MAX_POLICIES) this.#priced.clear();
      this.#priced.set(key, check);
    }
    return check;
  }
}
