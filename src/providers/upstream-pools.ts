import pg from "pg";
import { jsonSafeTypes } from "./json-safe-types.js";
import { SUPERUSER_UPSTREAM_REFUSAL } from "./provider-role.js";
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
  /**
   * Refuse connections whose server reports `is_superuser=on`: the provider's role may have been altered since
   * it registered. Off only with PGTOLL_ALLOW_PRIVILEGED_PROVIDER_ROLES.
   */
  refuseSuperuser: boolean;
}

/** Thrown by `pool.connect()` when the provider's role is a superuser and such sessions are refused. */
export class PrivilegedUpstreamError extends Error {
  override name = "PrivilegedUpstreamError";
}

/** A node-postgres client that remembers what the server said of its role in the startup's ParameterStatus. */
class ProviderClient extends pg.Client {
  isSuperuser = false;

  constructor(config?: pg.ClientConfig) {
    super(config);
    this.connection.on("parameterStatus", (message: { parameterName: string; parameterValue: string }) => {
      if (message.parameterName === "is_superuser") this.isSuperuser = message.parameterValue === "on";
    });
  }
}

/** One bounded node-postgres pool per provider database, created on first use, for `POST /api/query`. */
export class UpstreamPools {
  readonly #pools = new Map<string, { pool: pg.Pool; readOnly: boolean }>();

  constructor(private readonly options: UpstreamPoolOptions) {}

  /**
   * The provider's pool. A read-only provider's sessions start with `default_transaction_read_only=on`, so
   * PostgreSQL refuses every write; when the provider switches, its pool of the other kind is ended (requests
   * holding its connections finish first) and a new one is made.
   */
  get(provider: ProviderWithSecrets, readOnly = false): pg.Pool {
    const held = this.#pools.get(provider.id);
    if (held?.readOnly === readOnly) return held.pool;
    if (held) void held.pool.end().catch(() => {});
    const pool = new pg.Pool({
      connectionString: this.options.box.open(provider.connectionSecret),
      max: this.options.size,
      idleTimeoutMillis: 30_000,
      // The role is checked per connection (onConnect): a busy pool must still open new ones now and then.
      maxLifetimeSeconds: 60,
      connectionTimeoutMillis: this.options.acquireTimeoutMs ?? 5_000,
      statement_timeout: this.options.statementTimeoutMs,
      application_name: "pgtoll",
      ...(readOnly ? { options: "-c default_transaction_read_only=on" } : {}),
      types: jsonSafeTypes,
      Client: ProviderClient,
      // A refused connection is ended by the pool and its error reaches the caller of connect().
      onConnect: (client) => {
        if (this.options.refuseSuperuser && (client as ProviderClient).isSuperuser)
          throw new PrivilegedUpstreamError(SUPERUSER_UPSTREAM_REFUSAL);
      },
    });
    pool.on("error", () => {});
    this.#pools.set(provider.id, { pool, readOnly });
    return pool;
  }

  /** Idle and total connection counts per provider, for /metrics. */
  stats(): { providerId: string; total: number; idle: number; waiting: number }[] {
    return [...this.#pools].map(([providerId, { pool }]) => ({
      providerId,
      total: pool.totalCount,
      idle: pool.idleCount,
      waiting: pool.waitingCount,
    }));
  }

  async closeAll(): Promise<void> {
    const pools = [...this.#pools.values()];
    this.#pools.clear();
    await Promise.all(pools.map(({ pool }) => pool.end()));
  }
}
