import type { LookupFunction } from "node:net";
import type { SecureContext } from "node:tls";
import type pg from "pg";
import type { Logger } from "pino";
import type { EarningsTally } from "../analytics/earnings-tally.js";
import type { RefusalTally } from "../analytics/refusal-tally.js";
import type { ChargeWriter } from "../billing/charge-writer.js";
import type { LimitWatch } from "../billing/daily-limit-watch.js";
import type { WindowClock } from "../billing/window-clock.js";
import type { GuardPolicy, GuardVerdict } from "../guard/index.js";
import type { SecretBox } from "../providers/secret-box.js";
import type { ProxiedAddressSettings } from "./proxied-address.js";
import type { ProxyMetrics } from "./proxy-metrics.js";
import type { SessionDrain } from "./session-drain.js";
import type { SessionRegistry } from "./session-registry.js";
import type { UnauthenticatedConnections } from "./unauthenticated-connections.js";
import type { UpstreamSlots } from "./upstream-slots.js";

/** How the proxy reaches the management API's endpoints (see `src/control`). */
export interface EndpointRouting {
  /** Superuser URL of the cluster that hosts project databases; sessions log in there as the branch role. */
  clusterUrl: string;
  /** An endpoint's host is `<endpoint_id>.<proxyHost>`: the TLS server name routes on it. */
  proxyHost: string;
  /**
   * A small superuser pool on that cluster: it reads each session's backend start time, which with the backend's
   * pid is how the management plane finds the session to end it (control/endpoint-session-records.ts).
   */
  cluster: Pick<pg.Pool, "query">;
}

/** Everything a proxied session needs, shared by all sessions of one proxy server. */
export interface ProxyContext {
  /** pgtoll's own database: providers, ledger, and the management plane's records. */
  db: pg.Pool;
  box: SecretBox;
  slots: UpstreamSlots;
  chargeWriter: ChargeWriter;
  /** Tells the sessions' holds of daily limit changes made in any process; unset: limits bind new holds only. */
  limits?: LimitWatch;
  registry: SessionRegistry;
  metrics: ProxyMetrics;
  logger: Logger;
  /** The guard, memoised by SQL text. */
  check(sql: string): GuardVerdict;
  /** The policy `check` applies (standardPolicy when absent): a provider with table prices gets it with them. */
  policy?: GuardPolicy;
  /** When set, SSLRequest is answered 'S' and the session continues over TLS. */
  tls?: SecureContext;
  /** When set, clients naming an endpoint (`options=endpoint=<id>`, TLS server name) reach its branch. */
  endpoints?: EndpointRouting;
  statementTimeoutMs: number;
  /** Agent sessions may run as a superuser provider role (PGTOLL_ALLOW_PRIVILEGED_PROVIDER_ROLES). */
  allowPrivilegedProviderRoles: boolean;
  /** Resolves and checks providers' host names (PGTOLL_PROVIDER_HOSTS, checked-connect.ts); unset: no check. */
  providerLookup?: LookupFunction;
  reservationTtlSeconds: number;
  /** A session's first hold, in rows' worth of its price (PGTOLL_PROXY_RESERVE_ROWS). */
  reserveRows: number;
  /** Most a session's hold grows to, in rows (PGTOLL_PROXY_RESERVE_MAX_ROWS). */
  reserveMaxRows: number;
  /** Closes the sessions' windows on common ticks, every PGTOLL_WINDOW_INTERVAL_MS, on `chargeWriter`. */
  windowClock: WindowClock;
  /** Cost of an open window that closes it at once (PGTOLL_WINDOW_MAX_COST), micro-USDC. */
  windowMaxCostMicro: bigint;
  /** Startup (TLS, authentication, upstream connect) must finish within this. */
  startupTimeoutMs: number;
  /**
   * Connections that have not authenticated yet, capped in all and per address (PGTOLL_PROXY_MAX_UNAUTHENTICATED,
   * PGTOLL_PROXY_MAX_UNAUTHENTICATED_PER_ADDRESS). Warning: one instance per listener; sessions count themselves.
   */
  unauthenticated: UnauthenticatedConnections;
  /** Client connections at most (PGTOLL_PROXY_MAX_CONNECTIONS); default 10 000. */
  maxConnections?: number;
  /**
   * Client connections per client address at most (PGTOLL_PROXY_SESSIONS_PER_IP); this host's own addresses are
   * exempt. 0 or unset: no limit per address.
   */
  sessionsPerAddress?: number;
  /** Addresses `sessionsPerAddress` does not apply to. Default: this host's own (the remote MCP endpoint's). */
  exemptFromAddressLimit?(address: string): boolean;
  /** An idle session gives its unspent reservation back after this long. */
  idleReleaseMs: number;
  /**
   * The same for a session that serves REST's requests (`POST /api/query`, MCP); default
   * `REST_IDLE_RELEASE_MS`. Short: while a session holds funds, the agent's other sessions (a wire session, another
   * process's) cannot reserve them. Long enough that requests in quick succession reserve once, not once each.
   */
  restIdleReleaseMs?: number;
  /** Largest row relayed, in bytes (PGTOLL_MAX_ROW_BYTES); default 16 MiB. A larger one cuts its result off unread. */
  maxRowBytes?: number;
  /** PROXY protocol headers from trusted load balancers (PGTOLL_TRUSTED_PROXIES); unset: none is read. */
  proxyProtocol?: ProxiedAddressSettings;
  /** The open agent sessions, ended one by one as they finish their work when the server stops gracefully. */
  drain?: SessionDrain;
  /** Refused statements, counted for the providers' analytics (the REST surface's tally, shared). */
  refusals: RefusalTally;
  /** What each provider earned, counted as windows close (the REST surface's tally, shared), for /metrics. */
  earnings: EarningsTally;
  /** Reservations being given back by ended sessions; the server awaits them before it stops. */
  releases: Set<Promise<void>>;
}
