import type { LookupFunction } from "node:net";
import type { Duplex } from "node:stream";
import pg from "pg";
import { providerSocket } from "./checked-connect.js";
import { parseProviderConnection, sessionOptions } from "./connection-string.js";
import { jsonSafeTypes } from "./json-safe-types.js";
import { DEFAULT_MAX_ROW_BYTES, gatedMessages } from "./message-gate.js";
import { SUPERUSER_UPSTREAM_REFUSAL } from "./provider-role.js";
import type { ProviderWithSecrets } from "./registry.js";
import { DEFAULT_MAX_RESULTS_IN_MEMORY, ResultMemory } from "./result-memory.js";
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
  /**
   * How provider host names are resolved (checked-connect.ts): with PGTOLL_PROVIDER_HOSTS, each new connection
   * resolves the name and checks the address it connects to. Unset: the system resolver, no check.
   */
  lookup?: LookupFunction;
  /**
   * Largest message read from a provider's database, in bytes of its body (PGTOLL_MAX_ROW_BYTES): a larger one
   * (a row, or an error quoting a large value) fails its query and ends the connection, unread (message-gate.ts).
   * Default {@link DEFAULT_MAX_ROW_BYTES}.
   */
  maxMessageBytes?: number;
  /**
   * What the REST gateway's results may hold in memory at once, for the whole process (PGTOLL_MAX_RESULTS_IN_MEMORY):
   * a large message is counted in it while node-postgres assembles it, and requests count their rows in it
   * (result-memory.ts). Default {@link DEFAULT_MAX_RESULTS_IN_MEMORY}.
   */
  maxResultsInMemory?: number;
}

/** What the pool gives each of its clients: node-postgres's config, and pgtoll's cap on a message. */
interface ProviderClientConfig extends pg.ClientConfig {
  maxMessageBytes?: number;
  resultMemory?: ResultMemory;
}

/** Thrown by `pool.connect()` when the provider's role is a superuser and such sessions are refused. */
export class PrivilegedUpstreamError extends Error {
  override name = "PrivilegedUpstreamError";
}

/**
 * A node-postgres client that remembers what the server said of its role in the startup's ParameterStatus, and
 * whose parser reads only messages within `maxMessageBytes`.
 */
class ProviderClient extends pg.Client {
  isSuperuser = false;

  constructor(config?: ProviderClientConfig) {
    super(config);
    // The pool listens for errors only while a client is idle: a checked-out client's connection error (the
    // provider's database restarting, a refused message) would be an unhandled 'error' event, which ends the
    // process. The running query already fails with it, and its request releases the client as broken.
    this.on("error", () => {});
    const maxMessageBytes = config?.maxMessageBytes;
    if (maxMessageBytes !== undefined) {
      // attachListeners(stream) hands the socket (or its TLS layer) to the parser: it gets the gate instead.
      const connection = this.connection as unknown as { attachListeners(stream: Duplex): void };
      const attach = connection.attachListeners.bind(connection);
      connection.attachListeners = (stream) =>
        attach(gatedMessages(stream, maxMessageBytes, config?.resultMemory) as unknown as Duplex);
    }
    this.connection.on("parameterStatus", (message: { parameterName: string; parameterValue: string }) => {
      if (message.parameterName === "is_superuser") this.isSuperuser = message.parameterValue === "on";
    });
  }
}

/** A pool and what it serves: one provider database, read-only sessions or not. */
interface HeldPool {
  providerId: string;
  readOnly: boolean;
  pool: pg.Pool;
}

/**
 * Bounded node-postgres pools per provider database, created on first use, for `POST /api/query`: one for
 * read-write sessions and one for read-only ones, which serve a provider that declared its data read-only and the
 * single reads of every provider (they run there without a transaction of their own).
 */
export class UpstreamPools {
  readonly #pools = new Map<string, HeldPool>();
  /** The bytes of results the pools' connections and the requests reading them hold, together. */
  readonly resultMemory: ResultMemory;

  constructor(private readonly options: UpstreamPoolOptions) {
    this.resultMemory = new ResultMemory(options.maxResultsInMemory ?? DEFAULT_MAX_RESULTS_IN_MEMORY);
  }

  /**
   * The provider's pool for `readOnly` sessions. Those start with `default_transaction_read_only=on`, so
   * PostgreSQL refuses every write. The pools are kept apart by mode, so a provider that switches is served by
   * a pool of the new mode from the next request on. The other mode's pool is not ended: a request that took
   * it just before the switch may not have connected yet, and would fail; its idle connections close after
   * 30 s.
   */
  get(provider: ProviderWithSecrets, readOnly = false): pg.Pool {
    const key = `${provider.id}:${readOnly ? "ro" : "rw"}`;
    const held = this.#pools.get(key);
    if (held) return held.pool;
    // The fields of the connection string pgtoll takes (connection-string.ts), not the string itself: node-postgres
    // would let its query parameters (statement_timeout, options) replace the settings below.
    const { host, port, user, password, database, ssl, sslnegotiation, options } = parseProviderConnection(
      this.options.box.open(provider.connectionSecret),
    );
    const config: pg.PoolConfig & ProviderClientConfig = {
      maxMessageBytes: this.options.maxMessageBytes ?? DEFAULT_MAX_ROW_BYTES,
      resultMemory: this.resultMemory,
      host,
      port,
      user,
      password,
      database,
      ...(ssl === undefined ? {} : { ssl: ssl as pg.ClientConfig["ssl"] }),
      ...(sslnegotiation ? { sslnegotiation } : {}),
      max: this.options.size,
      idleTimeoutMillis: 30_000,
      // The role is checked per connection (onConnect): a busy pool must still open new ones now and then.
      maxLifetimeSeconds: 60,
      connectionTimeoutMillis: this.options.acquireTimeoutMs ?? 5_000,
      statement_timeout: this.options.statementTimeoutMs,
      application_name: "pgtoll",
      // A startup option, not a SET: it is the session's reset value, so DISCARD ALL between requests keeps it.
      options: sessionOptions(options, readOnly ? { default_transaction_read_only: "on" } : {}),
      types: jsonSafeTypes,
      Client: ProviderClient,
      stream: providerSocket({ lookup: this.options.lookup }),
      // A refused connection is ended by the pool and its error reaches the caller of connect().
      onConnect: (client) => {
        if (this.options.refuseSuperuser && (client as ProviderClient).isSuperuser)
          throw new PrivilegedUpstreamError(SUPERUSER_UPSTREAM_REFUSAL);
      },
    };
    const pool = new pg.Pool(config);
    pool.on("error", () => {});
    this.#pools.set(key, { providerId: provider.id, readOnly, pool });
    return pool;
  }

  /** Idle and total connection counts per provider pool, for /metrics. */
  stats(): { providerId: string; readOnly: boolean; total: number; idle: number; waiting: number }[] {
    return [...this.#pools.values()].map(({ providerId, readOnly, pool }) => ({
      providerId,
      readOnly,
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
