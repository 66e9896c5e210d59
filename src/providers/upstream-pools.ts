import pg from "pg";
import { jsonSafeTypes } from "./json-safe-types.js";
import type { ProviderWithSecrets } from "./registry.js";
import type { SecretBox } from "./secret-box.js";

export interface UpstreamPoolOptions {
  box: SecretBox;
  /** Connections per provider database. */
  size: number;
  /** Sent as the session's `statement_timeout`; the guard stops clients from changing it. */
  statementTimeoutMs: number;
  /** How long a request waits for a free connection before failing. */
  acquireTimeoutMs?: number;
}

/** One bounded node-postgres pool per provider database, created on first use, for `POST /api/query`. */
export class UpstreamPools {
  readonly #pools = new Map<string, pg.Pool>();

  constructor(private readonly options: UpstreamPoolOptions) {}

  get(provider: ProviderWithSecrets): pg.Pool {
    let pool = this.#pools.get(provider.id);
    if (!pool) {
      pool = new pg.Pool({
        connectionString: this.options.box.open(provider.connectionSecret),
        max: this.options.size,
        idleTimeoutMillis: 30_000,
        connectionTimeoutMillis: this.options.acquireTimeoutMs ?? 5_000,
        statement_timeout: this.options.statementTimeoutMs,
        application_name: "pgtoll",
        types: jsonSafeTypes,
      });
      pool.on("error", () => {});
      this.#pools.set(provider.id, pool);
    }
    return pool;
  }

  /** Idle and total connection counts per provider, for /metrics. */
  stats(): { providerId: string; total: number; idle: number; waiting: number }[] {
    return [...this.#pools].map(([providerId, pool]) => ({
      providerId,
      total: pool.totalCount,
      idle: pool.idleCount,
      waiting: pool.waitingCount,
    }));
  }

  async closeAll(): Promise<void> {
    const pools = [...this.#pools.values()];
    this.#pools.clear();
    await Promise.all(pools.map((pool) => pool.end()));
  }
}
