import type pg from "pg";
import type { Logger } from "pino";
import type { DepositVerifier } from "../billing/chain-verify.js";
import type { LimitWatch } from "../billing/daily-limit-watch.js";
import type { Config } from "../config.js";
import type { ControlSettings } from "../control/settings.js";
import type { GuardPolicy } from "../guard/index.js";
import type { SecretBox } from "../providers/secret-box.js";
import type { UpstreamPools } from "../providers/upstream-pools.js";
import type { ProxyAccess } from "../proxy/proxy-access.js";
import type { X402Gateway } from "../x402/accept-payment.js";
import type { Metrics } from "./plugins/metrics.js";
import type { RateLimitStore } from "./plugins/rate-limit-store.js";

/** Where the process is in its life, as load balancers are told by `GET /ready`. */
export interface Lifecycle {
  /** Set on SIGTERM/SIGINT: the process is stopping and takes no new work. */
  draining: boolean;
}

/** Everything the REST routes share; built once by the server, passed to each plugin (no globals). */
export interface GatewayContext {
  config: Pick<
    Config,
    | "chainId"
    | "rowCap"
    | "maxResultBytes"
    | "maxRowBytes"
    | "statementTimeoutMs"
    | "catalogRefreshIntervalMs"
    | "reservationTtlSeconds"
    | "httpRequestTimeoutMs"
    | "httpMaxConnections"
    | "rateLimit"
    | "mcpRateLimit"
    | "mcpSessionsPerIp"
    | "mcpMaxSessions"
    | "mcpProxyIdleMs"
    | "fundedReservePercent"
    | "bodyLimit"
    | "trustProxy"
    | "restAgentAuth"
    | "allowPrivilegedProviderRoles"
    | "providerHosts"
  >;
  db: pg.Pool;
  box: SecretBox;
  upstream: UpstreamPools;
  verifier: DepositVerifier;
  rateLimitStore: RateLimitStore;
  metrics: Metrics;
  logger: Logger;
  policy?: GuardPolicy;
  /** Tells the REST holds of daily limit changes made in any process; unset: limits bind new holds only. */
  limits?: LimitWatch;
  /** Unset: the process never drains (tests that build the app alone). */
  lifecycle?: Lifecycle;
  /** This process's wire proxy: `/api/query` runs its statements through it, and `/mcp` is served over it. */
  proxy?: ProxyAccess;
  /** x402 payments (PAYMENT-SIGNATURE, POST /api/topup); without it 402s offer no payment. */
  x402?: X402Gateway;
  /** Settings of the management API v2 (/api/v2); without them it is not served. */
  management?: ControlSettings;
}
