export interface EstimateCacheOptions {
  /** How long a statement's estimate is reused. Default 10 000 ms. */
  ttlMs?: number;
  /** Most statements kept; when full, it starts over. Default 10 000. */
  maxEntries?: number;
}

/** The planner's estimate of one statement's result: rows, and bytes as rows x the plan's row width. */
export interface PlanEstimate {
  rows: number;
  bytes: number;
}

/**
 * The planner's row estimates of recent statements, per provider and statement text, so that a statement run
 * over and over (typically the same text with new `params`) is explained once every `ttlMs` instead of on every
 * request. For a text with params the estimate is the one made for the params of the request that explained
 * it, as PostgreSQL's own generic plans are reused for any params; a text without params always plans the same
 * way, up to changes of its tables within `ttlMs`. Estimates only inform (`estimatedCost`): what is charged is
 * the actual row count.
 */
export class EstimateCache {
  readonly #entries = new Map<string, { estimate: PlanEstimate; expiresAt: number }>();
  readonly #ttlMs: number;
  readonly #maxEntries: number;

  constructor(options: EstimateCacheOptions = {}) {
    this.#ttlMs = options.ttlMs ?? 10_000;
    this.#maxEntries = options.maxEntries ?? 10_000;
  }

  get(providerId: string, sql: string): PlanEstimate | undefined {
    const key = `${providerId} ${sql}`;
    const entry = this.#entries.get(key);
    if (!entry) return undefined;
    if (entry.expiresAt > performance.now()) return entry.estimate;
    this.#entries.delete(key);
    return undefined;
  }

  set(providerId: string, sql: string, estimate: PlanEstimate): void {
    if (sql.length > 8192) return;
    if (this.#entries.size >= this.#maxEntries) this.#entries.clear();
    this.#entries.set(`${providerId} ${sql}`, { estimate, expiresAt: performance.now() + this.#ttlMs });
  }
}
