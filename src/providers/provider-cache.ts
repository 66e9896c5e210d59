import type { Queryable } from "../billing/ledger.js";
import {
  findProviderForQuery,
  type PricingRecord,
  type ProviderWithSecrets,
  pricingChangeCount,
} from "./registry.js";

export interface PricedProvider {
  provider: ProviderWithSecrets;
  pricing: PricingRecord;
}

export interface ProviderCacheOptions {
  /**
   * How long a provider and its pricing are reused without asking the database again. Pricing set through
   * this process (`setPricing`) is seen at once; pricing set by another pgtoll process sharing the database
   * is seen after at most this long. Default 1000 ms.
   */
  ttlMs?: number;
  /** Most providers kept; when full, it starts over. Default 10 000. */
  maxEntries?: number;
}

interface Entry {
  value: PricedProvider;
  expiresAt: number;
  /** `pricingChangeCount` when the lookup started: a later change makes the entry stale. */
  changeCount: number;
}

/**
 * The provider and pricing lookup of `POST /api/query`, memoised for a short time: every query needs both, and
 * they change rarely. Only complete answers are kept (a provider with pricing); an unknown provider or one
 * without pricing yet is looked up each time, so it is served as soon as it is registered and priced.
 */
export class ProviderCache {
  readonly #entries = new Map<string, Entry>();
  readonly #ttlMs: number;
  readonly #maxEntries: number;

  constructor(
    private readonly db: Queryable,
    options: ProviderCacheOptions = {},
  ) {
    this.#ttlMs = options.ttlMs ?? 1000;
    this.#maxEntries = options.maxEntries ?? 10_000;
  }

  /** The provider and its pricing; `pricing` null when it has none yet; null when there is no such provider. */
  async find(
    providerId: string,
  ): Promise<{ provider: ProviderWithSecrets; pricing: PricingRecord | null } | null> {
    const changeCount = pricingChangeCount(this.db);
    const entry = this.#entries.get(providerId);
    if (entry && entry.expiresAt > performance.now() && entry.changeCount === changeCount) return entry.value;
    const found = await findProviderForQuery(this.db, providerId);
    if (found?.pricing) {
      if (this.#entries.size >= this.#maxEntries) this.#entries.clear();
      this.#entries.set(providerId, {
        value: { provider: found.provider, pricing: found.pricing },
        expiresAt: performance.now() + this.#ttlMs,
        changeCount,
      });
    } else {
      this.#entries.delete(providerId);
    }
    return found;
  }
}
