import { resolve } from "node:path";
import { formatMicro, parseMicro } from "./billing/money.js";
import { unknownFlagReason } from "./command-flags.js";
import { DEFAULT_MAX_ROW_BYTES } from "./providers/message-gate.js";
import { type ProviderHostPolicy, parseProviderHosts } from "./providers/provider-hosts.js";
import { DEFAULT_MAX_RESULTS_IN_MEMORY } from "./providers/result-memory.js";
import { parseCidrList } from "./proxy/trusted-proxies.js";

/**
 * One configuration option: read from an environment variable, overridable by a CLI flag of the same
 * name (`PGTOLL_HTTP_PORT` -> `--http-port`, `DATABASE_URL` -> `--database-url`).
 */
interface OptionSpec<T> {
  env: string;
  description: string;
  /** Shown in the table of docs/configuration.md; `undefined` means "unset by default". */
  defaultText?: string;
  /** Another variable read when `env` is not set, so that deployments configured under that name keep working. */
  alsoReadFrom?: string;
  parse(raw: string | undefined): T;
}

export class ConfigError extends Error {
  constructor(
    readonly variable: string,
    reason: string,
  ) {
    super(`invalid configuration: ${variable} ${reason}`);
    this.name = "ConfigError";
  }
}

function text(_env: string, fallback?: string) {
  return (raw: string | undefined) => (raw === undefined || raw === "" ? fallback : raw);
}

function integer(env: string, fallback: number, min: number, max: number) {
  return (raw: string | undefined): number => {
    if (raw === undefined || raw === "") return fallback;
    if (!/^\d+$/.test(raw)) throw new ConfigError(env, `must be a whole number, got "${raw}"`);
    const value = Number(raw);
    if (value < min || value > max)
      throw new ConfigError(env, `must be between ${min} and ${max}, got ${raw}`);
    return value;
  };
}

/** An amount of USDC as a decimal string with at most 6 places, read as micro-USDC. */
function usdc(env: string, fallbackMicro: bigint, minMicro: bigint, maxMicro: bigint) {
  return (raw: string | undefined): bigint => {
    if (raw === undefined || raw === "") return fallbackMicro;
    const micro = parseMicro(raw);
    if (micro === null) throw new ConfigError(env, `must be an amount of USDC like 0.05, got "${raw}"`);
    if (micro < minMicro || micro > maxMicro)
      throw new ConfigError(
        env,
        `must be between ${formatMicro(minMicro)} and ${formatMicro(maxMicro)}, got ${raw}`,
      );
    return micro;
  };
}

function onOff(env: string, fallback: boolean) {
  return (raw: string | undefined): boolean => {
    if (raw === undefined || raw === "") return fallback;
    const value = raw.toLowerCase();
    if (["on", "true", "1", "yes"].includes(value)) return true;
    if (["off", "false", "0", "no"].includes(value)) return false;
    throw new ConfigError(env, `must be "on" or "off", got "${raw}"`);
  };
}

function oneOf<T extends string>(env: string, fallback: T, values: readonly T[]) {
  return (raw: string | undefined): T => {
    if (raw === undefined || raw === "") return fallback;
    if (!values.includes(raw as T))
      throw new ConfigError(env, `must be one of ${values.join(", ")}, got "${raw}"`);
    return raw as T;
  };
}

function url(env: string, protocols: readonly string[], fallback?: string) {
  return (raw: string | undefined): string | undefined => {
    const value = raw === undefined || raw === "" ? fallback : raw;
    if (value === undefined) return undefined;
    let parsed: URL;
    try {
      parsed = new URL(value);
    } catch {
      throw new ConfigError(env, "is not a valid URL");
    }
    if (!protocols.includes(parsed.protocol)) {
      throw new ConfigError(env, `must use ${protocols.join(" or ")}, got "${parsed.protocol}"`);
    }
    return value;
  };
}

function address(env: string, fallback: `0x${string}`) {
  return (raw: string | undefined): `0x${string}` => {
    const value = raw === undefined || raw === "" ? fallback : raw;
    if (!/^0x[0-9a-fA-F]{40}$/.test(value))
      throw new ConfigError(env, `must be 0x followed by 40 hex digits`);
    return value.toLowerCase() as `0x${string}`;
  };
}

function secretKey(env: string) {
  return (raw: string | undefined): Buffer | undefined => {
    if (raw === undefined || raw === "") return undefined;
    const key = /^[0-9a-fA-F]{64}$/.test(raw) ? Buffer.from(raw, "hex") : Buffer.from(raw, "base64");
    if (key.length !== 32) throw new ConfigError(env, "must be 32 bytes, as 64 hex digits or base64");
    return key;
  };
}

/** A 32-byte secp256k1 private key as 0x and 64 hex digits (a key that signs transactions). */
function privateKey(env: string) {
  return (raw: string | undefined): `0x${string}` | undefined => {
    if (raw === undefined || raw === "") return undefined;
    const value = raw.startsWith("0x") ? raw : `0x${raw}`;
    if (!/^0x[0-9a-fA-F]{64}$/.test(value))
      throw new ConfigError(env, "must be a private key: 0x followed by 64 hex digits");
    return value as `0x${string}`;
  };
}

export const BASE_USDC = "0x833589fcd6edb6e08f4c7c32d4f71b54bda02913";

/** Every option pgtoll reads. The table of docs/configuration.md is this list (a test compares them). */
export const optionSpecs = {
  host: {
    env: "PGTOLL_HOST",
    description: "Address the HTTP API and the wire proxy listen on.",
    defaultText: "127.0.0.1",
    parse: (raw: string | undefined) => raw || "127.0.0.1",
  },
  httpPort: {
    env: "PGTOLL_HTTP_PORT",
    description: "HTTP port of the REST APIs, /metrics and /docs (0 picks a free port).",
    defaultText: "3000",
    parse: integer("PGTOLL_HTTP_PORT", 3000, 0, 65535),
  },
  proxyPort: {
    env: "PGTOLL_PROXY_PORT",
    description: "Port of the PostgreSQL wire proxy (0 picks a free port).",
    defaultText: "6543",
    parse: integer("PGTOLL_PROXY_PORT", 6543, 0, 65535),
  },
  tlsCert: {
    env: "PGTOLL_TLS_CERT",
    description:
      "PEM certificate file for the proxy's TLS (with PGTOLL_TLS_KEY). Unset: SSLRequest is answered N; `pgtoll dev` makes a certificate of its own.",
    parse: text("PGTOLL_TLS_CERT"),
  },
  tlsKey: {
    env: "PGTOLL_TLS_KEY",
    description: "PEM private key file for the proxy's TLS.",
    parse: text("PGTOLL_TLS_KEY"),
  },
  proxyUpstreamLimit: {
    env: "PGTOLL_PROXY_UPSTREAM_LIMIT",
    description: "Upstream sessions per provider the proxy opens at most; further client sessions wait.",
    defaultText: "50",
    parse: integer("PGTOLL_PROXY_UPSTREAM_LIMIT", 50, 1, 10_000),
  },
  proxyQueueTimeoutMs: {
    env: "PGTOLL_PROXY_QUEUE_TIMEOUT_MS",
    description: "How long a client session waits for an upstream session before it is refused (53300).",
    defaultText: "30000",
    parse: integer("PGTOLL_PROXY_QUEUE_TIMEOUT_MS", 30_000, 0, 3_600_000),
  },
  fundedReservePercent: {
    env: "PGTOLL_FUNDED_RESERVE_PERCENT",
    description:
      "Share, in percent, of each provider's upstream sessions (PGTOLL_PROXY_UPSTREAM_LIMIT) and of the remote MCP sessions (PGTOLL_MCP_MAX_SESSIONS) that only funded agents may take: sessions that pay nothing (a provider that charges nothing, an agent with no balance) wait or are refused once only this share is left.",
    defaultText: "20",
    parse: integer("PGTOLL_FUNDED_RESERVE_PERCENT", 20, 0, 90),
  },
  proxySessionsPerIp: {
    env: "PGTOLL_PROXY_SESSIONS_PER_IP",
    description:
      "Open wire-proxy connections (sessions, in any phase) per client address; further ones are refused with 53300. Addresses of pgtoll's own host (the remote MCP endpoint's sessions) are not limited per address. 0: no limit per address. Warning: behind a TCP load balancer every client has the balancer's address: set 0 there, or have the balancer send a PROXY header (PGTOLL_TRUSTED_PROXIES).",
    defaultText: "100",
    parse: integer("PGTOLL_PROXY_SESSIONS_PER_IP", 100, 0, 1_000_000),
  },
  proxyReserveRows: {
    env: "PGTOLL_PROXY_RESERVE_ROWS",
    description:
      "Rows' worth of balance a proxy session holds at first (the hold grows as the session spends).",
    defaultText: "1000",
    parse: integer("PGTOLL_PROXY_RESERVE_ROWS", 1000, 1, 100_000_000),
  },
  proxyReserveMaxRows: {
    env: "PGTOLL_PROXY_RESERVE_MAX_ROWS",
    description:
      "Most rows' worth of balance one proxy session may hold: a session's hold starts at PGTOLL_PROXY_RESERVE_ROWS and doubles at each top-up while it spends (above that start, never more than a quarter of the agent's available balance).",
    defaultText: "1000000",
    parse: integer("PGTOLL_PROXY_RESERVE_MAX_ROWS", 1_000_000, 1, 1_000_000_000),
  },
  windowIntervalMs: {
    env: "PGTOLL_WINDOW_INTERVAL_MS",
    alsoReadFrom: "PGTOLL_SETTLE_INTERVAL_MS",
    description:
      "Longest time a proxy session's charges wait before they are written to the ledger as one entry (a charge window). Warning: with PGTOLL_WINDOW_MAX_COST it bounds what a crash of pgtoll leaves uncharged. Also read from PGTOLL_SETTLE_INTERVAL_MS.",
    defaultText: "250",
    parse: integer("PGTOLL_WINDOW_INTERVAL_MS", 250, 1, 1000),
  },
  windowMaxCostMicro: {
    env: "PGTOLL_WINDOW_MAX_COST",
    alsoReadFrom: "PGTOLL_SETTLE_MAX_COST",
    description:
      "Cost, in USDC, at which a proxy session's open window is closed and written at once. A crash of pgtoll leaves at most twice this much uncharged per open session (its open window and its windows being written, together; never an overcharge): a session that reaches that waits for the ledger. Also read from PGTOLL_SETTLE_MAX_COST.",
    defaultText: "1",
    parse: usdc("PGTOLL_WINDOW_MAX_COST", 1_000_000n, 1n, 1_000_000_000n),
  },
  allowPrivilegedProviderRoles: {
    env: "PGTOLL_ALLOW_PRIVILEGED_PROVIDER_ROLES",
    description:
      "`on` accepts provider databases whose role is a superuser or holds administrative rights (BYPASSRLS, CREATEROLE, CREATEDB, REPLICATION, pg_* administrative roles). Warning: every agent then runs with those rights; for local experiments only, and logged at every start.",
    defaultText: "off",
    parse: onOff("PGTOLL_ALLOW_PRIVILEGED_PROVIDER_ROLES", false),
  },
  providerHosts: {
    env: "PGTOLL_PROVIDER_HOSTS",
    description:
      "Where provider databases may be, checked when a provider registers and at every connection to its database: comma-separated `public` (any address outside the loopback, private, link-local and reserved ranges), networks (`10.0.0.0/8`, `fd00::/8`), addresses, host names (allowed whatever they resolve to) or `any`. Unset: `public` under `pgtoll start`, `any` under `pgtoll dev`. Warning: registration is open to anyone, so each network listed is one anyone can make pgtoll connect to; list only those that hold provider databases.",
    defaultText: "public",
    parse: (raw: string | undefined): ProviderHostPolicy | undefined => {
      if (raw === undefined || raw === "") return undefined;
      try {
        return parseProviderHosts(raw);
      } catch (error) {
        throw new ConfigError("PGTOLL_PROVIDER_HOSTS", (error as Error).message);
      }
    },
  },
  restAgentAuth: {
    env: "PGTOLL_REST_AGENT_AUTH",
    description:
      "`wallet`: REST agent endpoints trust the wallet in the request (the spec's behaviour). `signature`: they also require an agent token in `Authorization: Bearer`.",
    defaultText: "wallet",
    parse: oneOf("PGTOLL_REST_AGENT_AUTH", "wallet", ["wallet", "signature"] as const),
  },
  dataDir: {
    env: "PGTOLL_DATA_DIR",
    description: "Directory for the embedded PostgreSQL cluster, the generated secret key and the lock file.",
    defaultText: "./.pgtoll",
    parse: (raw: string | undefined) => resolve(raw || "./.pgtoll"),
  },
  databaseUrl: {
    env: "DATABASE_URL",
    description:
      "PostgreSQL URL of the metadata and ledger database. Unset: an embedded PostgreSQL is started in the data directory.",
    parse: url("DATABASE_URL", ["postgres:", "postgresql:"]),
  },
  rpcUrl: {
    env: "PGTOLL_RPC_URL",
    description: "JSON-RPC URL of the chain that deposits are verified on.",
    defaultText: "https://mainnet.base.org",
    parse: url("PGTOLL_RPC_URL", ["http:", "https:"], "https://mainnet.base.org") as (
      raw: string | undefined,
    ) => string,
  },
  chainId: {
    env: "PGTOLL_CHAIN_ID",
    description: "Chain id the RPC must report (Base mainnet is 8453).",
    defaultText: "8453",
    parse: integer("PGTOLL_CHAIN_ID", 8453, 1, 2 ** 31 - 1),
  },
  tokenAddress: {
    env: "PGTOLL_TOKEN_ADDRESS",
    description: "ERC-20 contract whose Transfer logs count as deposits (6 decimals).",
    defaultText: BASE_USDC,
    parse: address("PGTOLL_TOKEN_ADDRESS", BASE_USDC),
  },
  tokenName: {
    env: "PGTOLL_TOKEN_NAME",
    description:
      "The token's EIP-712 domain name, offered to x402 clients to sign with (Base's USDC: USD Coin).",
    defaultText: "USD Coin",
    parse: (raw: string | undefined) => raw || "USD Coin",
  },
  tokenVersion: {
    env: "PGTOLL_TOKEN_VERSION",
    description: "The token's EIP-712 domain version, offered to x402 clients (Base's USDC: 2).",
    defaultText: "2",
    parse: (raw: string | undefined) => raw || "2",
  },
  x402SettlerKey: {
    env: "PGTOLL_X402_SETTLER_KEY",
    description:
      "Private key of an account with gas on the chain: pgtoll then settles x402 payments itself (its own facilitator) by submitting transferWithAuthorization. **Warning:** a hot key: give it gas money only, and set it in the environment (a flag shows in the process list). Unset (and no facilitator URL): x402 is off.",
    parse: privateKey("PGTOLL_X402_SETTLER_KEY"),
  },
  x402FacilitatorUrl: {
    env: "PGTOLL_X402_FACILITATOR_URL",
    description:
      "URL of an x402 facilitator (its /verify and /settle) that verifies and settles x402 payments instead of pgtoll. Not with PGTOLL_X402_SETTLER_KEY.",
    parse: url("PGTOLL_X402_FACILITATOR_URL", ["http:", "https:"]),
  },
  x402MinTopupMicro: {
    env: "PGTOLL_X402_MIN_TOPUP",
    description:
      "Smallest x402 payment, in USDC: a query the balance cannot pay asks for its estimated cost or this, whichever is more; what the query does not spend stays as balance.",
    defaultText: "1",
    parse: usdc("PGTOLL_X402_MIN_TOPUP", 1_000_000n, 1n, 1_000_000_000_000n),
  },
  x402MaxTopupMicro: {
    env: "PGTOLL_X402_MAX_TOPUP",
    description: "Largest x402 payment, in USDC (a query's or POST /api/topup's).",
    defaultText: "100",
    parse: usdc("PGTOLL_X402_MAX_TOPUP", 100_000_000n, 1n, 1_000_000_000_000n),
  },
  minConfirmations: {
    env: "PGTOLL_MIN_CONFIRMATIONS",
    description: "Blocks (including the transaction's own) before a deposit is credited.",
    defaultText: "3",
    parse: integer("PGTOLL_MIN_CONFIRMATIONS", 3, 1, 10_000),
  },
  rateLimit: {
    env: "PGTOLL_RATE_LIMIT",
    description: "`on` or `off`: the per-IP limits of the payment gateway.",
    defaultText: "on",
    parse: onOff("PGTOLL_RATE_LIMIT", true),
  },
  mcpRateLimit: {
    env: "PGTOLL_MCP_RATE_LIMIT",
    description:
      "Requests per minute each agent may make to the remote MCP endpoint (`/mcp`), counted per agent, not per IP (off with PGTOLL_RATE_LIMIT=off).",
    defaultText: "600",
    parse: integer("PGTOLL_MCP_RATE_LIMIT", 600, 1, 1_000_000),
  },
  mcpSessionsPerIp: {
    env: "PGTOLL_MCP_SESSIONS_PER_IP",
    description:
      "Open remote MCP sessions per client address (the address as PGTOLL_TRUST_PROXY gives it); a further `initialize` gets 429. 0: no limit per address.",
    defaultText: "50",
    parse: integer("PGTOLL_MCP_SESSIONS_PER_IP", 50, 0, 1_000_000),
  },
  mcpMaxSessions: {
    env: "PGTOLL_MCP_MAX_SESSIONS",
    description:
      "Open remote MCP sessions at most, in this process; a further `initialize` gets 503 (PGTOLL_FUNDED_RESERVE_PERCENT of them only for funded agents).",
    defaultText: "2000",
    parse: integer("PGTOLL_MCP_MAX_SESSIONS", 2000, 1, 1_000_000),
  },
  mcpProxyIdleMs: {
    env: "PGTOLL_MCP_PROXY_IDLE_MS",
    description:
      "How long an MCP session keeps its wire-proxy session (and so an upstream session of the provider) after its last tool call that needed the database; the next such call opens a new one. Warning: a transaction block left open by `query` calls is rolled back then.",
    defaultText: "10000",
    parse: integer("PGTOLL_MCP_PROXY_IDLE_MS", 10_000, 100, 3_600_000),
  },
  secretKey: {
    env: "PGTOLL_SECRET_KEY",
    description:
      "32-byte key (hex or base64) that encrypts stored connection strings. Unset: generated into `<data dir>/secret.key`. Every process sharing a database needs the same key.",
    parse: secretKey("PGTOLL_SECRET_KEY"),
  },
  redisUrl: {
    env: "REDIS_URL",
    description:
      "Redis URL for rate-limit counters shared by several pgtoll processes. Unset: counters live in memory.",
    parse: url("REDIS_URL", ["redis:", "rediss:"]),
  },
  logLevel: {
    env: "LOG_LEVEL",
    description: "pino log level.",
    defaultText: "info",
    parse: oneOf("LOG_LEVEL", "info", [
      "fatal",
      "error",
      "warn",
      "info",
      "debug",
      "trace",
      "silent",
    ] as const),
  },
  trustProxy: {
    env: "PGTOLL_TRUST_PROXY",
    description:
      "`on` to take the client IP from X-Forwarded-For (only behind a trusted load balancer). HTTP only: the wire proxy takes the client address from a PROXY protocol header (PGTOLL_TRUSTED_PROXIES).",
    defaultText: "off",
    parse: onOff("PGTOLL_TRUST_PROXY", false),
  },
  trustedProxies: {
    env: "PGTOLL_TRUSTED_PROXIES",
    description:
      "Addresses and CIDR ranges (comma-separated) of load balancers whose PROXY protocol header (v1 or v2) the wire proxy takes: the client address it carries is the session's for endpoints' IP allowlists, per-address limits and refusal logs. A PROXY header from any other peer closes the connection. Unset: none.",
    parse: (raw: string | undefined): string[] => {
      try {
        return parseCidrList(raw ?? "");
      } catch (error) {
        throw new ConfigError("PGTOLL_TRUSTED_PROXIES", (error as Error).message);
      }
    },
  },
  proxyProtocol: {
    env: "PGTOLL_PROXY_PROTOCOL",
    description:
      "`optional`: a connection from PGTOLL_TRUSTED_PROXIES may come without a PROXY header (its peer address is then the client's). `required`: such a connection without one is closed.",
    defaultText: "optional",
    parse: oneOf("PGTOLL_PROXY_PROTOCOL", "optional", ["optional", "required"] as const),
  },
  rowCap: {
    env: "PGTOLL_ROW_CAP",
    description:
      "Most rows a `POST /api/query` answer carries: the proxy relays no row past it and the answer is cut off there (`truncated`, `stoppedBy` `result_too_large`), only the rows answered charged.",
    defaultText: "10000",
    parse: integer("PGTOLL_ROW_CAP", 10_000, 1, 10_000_000),
  },
  maxRowBytes: {
    env: "PGTOLL_MAX_ROW_BYTES",
    description:
      "Largest row (a DataRow or COPY TO STDOUT data message, in bytes) pgtoll reads from a provider's database, on every surface; a statement with a larger row is cut off from the row's length word, before it is read (SQLSTATE 54000 on the wire and in MCP tools, 422 `row_too_large` on REST). Other messages from the database above it (at least 1 MiB) end the wire session.",
    defaultText: "16777216",
    parse: integer("PGTOLL_MAX_ROW_BYTES", DEFAULT_MAX_ROW_BYTES, 1024, 1024 * 1024 * 1024),
  },
  maxResultBytes: {
    env: "PGTOLL_MAX_RESULT_BYTES",
    description:
      "Most bytes of rows a `POST /api/query` answer carries (DataRow payloads, summed as they arrive): the proxy relays no row past it and the answer is cut off there (`truncated`, `stoppedBy` `result_too_large`), only the rows answered charged.",
    defaultText: "33554432",
    parse: integer("PGTOLL_MAX_RESULT_BYTES", 32 * 1024 * 1024, 1024, 1024 * 1024 * 1024),
  },
  maxResultsInMemory: {
    env: "PGTOLL_MAX_RESULTS_IN_MEMORY",
    description:
      "Most bytes of provider results `POST /api/query` holds in memory at once, all requests together (each request's rows until it is answered); a request whose next row would pass it is refused (503 `results_memory_full`) and its session closed, the rows relayed before charged. At least PGTOLL_MAX_RESULT_BYTES.",
    defaultText: "268435456",
    parse: integer(
      "PGTOLL_MAX_RESULTS_IN_MEMORY",
      DEFAULT_MAX_RESULTS_IN_MEMORY,
      1024 * 1024,
      64 * 1024 * 1024 * 1024,
    ),
  },
  statementTimeoutMs: {
    env: "PGTOLL_STATEMENT_TIMEOUT_MS",
    description: "Longest a statement may run on a provider's database.",
    defaultText: "10000",
    parse: integer("PGTOLL_STATEMENT_TIMEOUT_MS", 10_000, 100, 3_600_000),
  },
  catalogRefreshIntervalMs: {
    env: "PGTOLL_CATALOG_REFRESH_INTERVAL_MS",
    description:
      "How often the tables of listed providers are read again from their databases for the catalog; 0: only when a provider saves its listing.",
    defaultText: "3600000",
    parse: integer("PGTOLL_CATALOG_REFRESH_INTERVAL_MS", 3_600_000, 0, 7 * 24 * 3_600_000),
  },
  providerPoolSize: {
    env: "PGTOLL_PROVIDER_POOL_SIZE",
    description:
      "Connections per provider database used by `POST /api/query` for the planner's estimates (`estimatedCost`); the queries themselves run on the wire proxy's sessions.",
    defaultText: "5",
    parse: integer("PGTOLL_PROVIDER_POOL_SIZE", 5, 1, 1000),
  },
  bodyLimit: {
    env: "PGTOLL_BODY_LIMIT",
    description: "Largest accepted HTTP request body, in bytes.",
    defaultText: "1048576",
    parse: integer("PGTOLL_BODY_LIMIT", 1_048_576, 1024, 100 * 1_048_576),
  },
  httpRequestTimeoutMs: {
    env: "PGTOLL_HTTP_REQUEST_TIMEOUT_MS",
    description:
      "How long an HTTP client has to send a whole request (headers and body) after it connects or its previous request ended; slower ones (slowloris, idle sockets) are disconnected.",
    defaultText: "30000",
    parse: integer("PGTOLL_HTTP_REQUEST_TIMEOUT_MS", 30_000, 1000, 600_000),
  },
  httpMaxConnections: {
    env: "PGTOLL_HTTP_MAX_CONNECTIONS",
    description: "Open HTTP connections at most; further ones are closed at once.",
    defaultText: "10000",
    parse: integer("PGTOLL_HTTP_MAX_CONNECTIONS", 10_000, 1, 1_000_000),
  },
  proxyMaxConnections: {
    env: "PGTOLL_PROXY_MAX_CONNECTIONS",
    description: "Open wire-proxy client connections at most; further ones are refused with 53300.",
    defaultText: "10000",
    parse: integer("PGTOLL_PROXY_MAX_CONNECTIONS", 10_000, 1, 1_000_000),
  },
  proxyMaxUnauthenticated: {
    env: "PGTOLL_PROXY_MAX_UNAUTHENTICATED",
    description:
      "Wire-proxy connections that have not finished authenticating, at most, from all addresses: a new one beyond it closes the one that has waited longest (honest clients authenticate in milliseconds), so idle connections cannot lock honest clients out.",
    defaultText: "1000",
    parse: integer("PGTOLL_PROXY_MAX_UNAUTHENTICATED", 1000, 1, 1_000_000),
  },
  proxyMaxUnauthenticatedPerAddress: {
    env: "PGTOLL_PROXY_MAX_UNAUTHENTICATED_PER_ADDRESS",
    description:
      "Wire-proxy connections that have not finished authenticating from one client address (an IPv6 /64 counts as one), at most; further ones are refused at once (53300). Loopback is not capped. 0: no cap. **Warning:** behind a TCP load balancer every client has the balancer's address: set 0 there, or have the balancer send a PROXY header (PGTOLL_TRUSTED_PROXIES).",
    defaultText: "100",
    parse: integer("PGTOLL_PROXY_MAX_UNAUTHENTICATED_PER_ADDRESS", 100, 0, 1_000_000),
  },
  proxyStartupTimeoutMs: {
    env: "PGTOLL_PROXY_STARTUP_TIMEOUT_MS",
    description:
      "How long a wire-proxy client has to finish its startup (TLS, authentication, the upstream session) before it is disconnected.",
    defaultText: "30000",
    parse: integer("PGTOLL_PROXY_STARTUP_TIMEOUT_MS", 30_000, 1000, 600_000),
  },
  reservationTtlSeconds: {
    env: "PGTOLL_RESERVATION_TTL_S",
    description:
      "How long a reservation that is never released holds funds before it expires and is given back.",
    defaultText: "300",
    parse: integer("PGTOLL_RESERVATION_TTL_S", 300, 30, 86_400),
  },
  projectsDatabaseUrl: {
    env: "PGTOLL_PROJECTS_DATABASE_URL",
    description:
      "Superuser URL of the PostgreSQL cluster that hosts the management API's project databases and roles. Unset: the embedded cluster, or DATABASE_URL's server.",
    parse: url("PGTOLL_PROJECTS_DATABASE_URL", ["postgres:", "postgresql:"]),
  },
  proxyHost: {
    env: "PGTOLL_PROXY_HOST",
    description: "Host name clients reach the wire proxy at; an endpoint's host is `<endpoint_id>.<this>`.",
    defaultText: "localhost",
    parse: (raw: string | undefined) => raw || "localhost",
  },
  proxyPublicPort: {
    env: "PGTOLL_PROXY_PUBLIC_PORT",
    description:
      "Port clients reach the wire proxy on, written into connection URIs. Unset: PGTOLL_PROXY_PORT.",
    parse: (raw: string | undefined) =>
      raw ? integer("PGTOLL_PROXY_PUBLIC_PORT", 0, 1, 65535)(raw) : undefined,
  },
  region: {
    env: "PGTOLL_REGION",
    description: "Region id reported for every project of the management API (`region_id`).",
    defaultText: "local",
    parse: (raw: string | undefined) => raw || "local",
  },
  shutdownDelayMs: {
    env: "PGTOLL_SHUTDOWN_DELAY_MS",
    description:
      "On SIGTERM or SIGINT, how long pgtoll goes on serving as before, new wire connections included, while GET /ready answers 503, before it stops listening and drains: set it above the time a load balancer takes to take it out of rotation (HAProxy: fall x inter), since a connection the balancer sends once the listener is closed is refused, and one still queued at the close is reset without a word.",
    defaultText: "0",
    parse: integer("PGTOLL_SHUTDOWN_DELAY_MS", 0, 0, 600_000),
  },
  shutdownGraceMs: {
    env: "PGTOLL_SHUTDOWN_GRACE_MS",
    description:
      "On SIGTERM or SIGINT, how long each open wire session may finish its statement and transaction before it is ended with 57P01 (a second signal stops at once).",
    defaultText: "30000",
    parse: integer("PGTOLL_SHUTDOWN_GRACE_MS", 30_000, 0, 3_600_000),
  },
  branchFenceGraceMs: {
    env: "PGTOLL_BRANCH_FENCE_GRACE_MS",
    description:
      "How long creating a branch lets open transactions on the parent finish before ending their sessions.",
    defaultText: "5000",
    parse: integer("PGTOLL_BRANCH_FENCE_GRACE_MS", 5000, 0, 600_000),
  },
} satisfies Record<string, OptionSpec<unknown>>;

type Specs = typeof optionSpecs;
export type Config = { [K in keyof Specs]: ReturnType<Specs[K]["parse"]> };

/** `PGTOLL_HTTP_PORT` -> `http-port`; `DATABASE_URL` -> `database-url`. */
export function flagName(env: string): string {
  return env
    .replace(/^PGTOLL_/, "")
    .toLowerCase()
    .replace(/_/g, "-");
}

/**
 * Reads every option from `env`, letting `--flag value` / `--flag=value` in `argv` win.
 * Throws a {@link ConfigError} naming the first bad variable or an unknown flag (and the known flag nearest to
 * it, among the options and `commandFlags`, the calling command's own flags, already taken out of `argv`).
 */
export function loadConfig(
  env: NodeJS.ProcessEnv = process.env,
  argv: readonly string[] = [],
  commandFlags: readonly string[] = [],
): Config {
  const byFlag = new Map(Object.values(optionSpecs).map((spec) => [flagName(spec.env), spec.env]));
  const values: Record<string, string | undefined> = {};
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] ?? "";
    if (!arg.startsWith("--"))
      throw new ConfigError(arg, "is not an option (options look like --http-port 3000)");
    const [name = "", inline] = arg.slice(2).split(/=(.*)/s, 2);
    const envName = byFlag.get(name);
    if (!envName)
      throw new ConfigError(`--${name}`, unknownFlagReason(name, [...commandFlags, ...byFlag.keys()]));
    const value = inline ?? argv[++i];
    if (value === undefined) throw new ConfigError(`--${name}`, "needs a value");
    values[envName] = value;
  }
  const config: Record<string, unknown> = {};
  for (const [key, spec] of Object.entries(optionSpecs) as [string, OptionSpec<unknown>][]) {
    config[key] = spec.parse(
      values[spec.env] ?? env[spec.env] ?? (spec.alsoReadFrom ? env[spec.alsoReadFrom] : undefined),
    );
  }
  return checkCombinations(config as Config);
}

/** Rules between options, checked once each is valid on its own. */
function checkCombinations(config: Config): Config {
  if (config.x402SettlerKey && config.x402FacilitatorUrl)
    throw new ConfigError(
      "PGTOLL_X402_SETTLER_KEY",
      "and PGTOLL_X402_FACILITATOR_URL are both set: x402 payments are settled either by pgtoll or by a facilitator, set one",
    );
  if (config.x402MinTopupMicro > config.x402MaxTopupMicro)
    throw new ConfigError("PGTOLL_X402_MIN_TOPUP", "is more than PGTOLL_X402_MAX_TOPUP");
  if (config.maxResultsInMemory < config.maxResultBytes)
    throw new ConfigError(
      "PGTOLL_MAX_RESULTS_IN_MEMORY",
      "is less than PGTOLL_MAX_RESULT_BYTES: no request could read its largest result",
    );
  return config;
}
