import { encodeErrorResponse } from "./serializer.js";

/**
 * SQLSTATEs the proxy answers with. `PT402` is pgtoll's own class "PT" (no PostgreSQL class uses it):
 * the agent's balance does not cover the statement; deposit more and retry.
 */
export const SqlState = {
  insufficientFunds: "PT402",
  insufficientPrivilege: "42501",
  readOnlyTransaction: "25006",
  syntaxError: "42601",
  invalidParameterValue: "22023",
  programLimitExceeded: "54000",
  invalidPassword: "28P01",
  invalidAuthorization: "28000",
  invalidCatalogName: "3D000",
  featureNotSupported: "0A000",
  protocolViolation: "08P01",
  connectionFailure: "08006",
  connectionRejected: "08004",
  tooManyConnections: "53300",
  adminShutdown: "57P01",
  cannotConnectNow: "57P03",
} as const;

/** How an agent funds its balance with a provider: the hint of every insufficient-funds answer of the proxy. */
export const FUNDING_HINT =
  "POST /api/topup pays a top-up with x402 from the agent's wallet in one request (where the gateway offers x402); POST /api/deposit credits a USDC transfer to the provider's wallet";

export function errorFrame(
  code: string,
  message: string,
  options: { fatal?: boolean; detail?: string; hint?: string } = {},
): Buffer {
  return encodeErrorResponse({
    severity: options.fatal ? "FATAL" : "ERROR",
    code,
    message,
    ...(options.detail ? { detail: options.detail } : {}),
    ...(options.hint ? { hint: options.hint } : {}),
  });
}

/** A session-ending refusal during startup: sent as a FATAL ErrorResponse, then the socket closes. */
export class StartupRefusal extends Error {
  constructor(
    readonly sqlState: string,
    message: string,
    /** Metric label for `pgtoll_proxy_sessions_refused_total`. */
    readonly reason: string,
    readonly hint?: string,
  ) {
    super(message);
    this.name = "StartupRefusal";
  }
}

/**
 * A connection that ends during startup without an answer, as PostgreSQL ends one whose startup packet it cannot
 * read (it only logs it): the client is gone, or sent what cannot be framed as a startup packet (a Terminate from a
 * client that ended before it started, garbage, a bad length word). Logged at debug level, never answered.
 */
export class UnansweredClose extends Error {
  constructor(
    message: string,
    /** Metric label for `pgtoll_proxy_sessions_refused_total`. */
    readonly reason: string,
  ) {
    super(message);
    this.name = "UnansweredClose";
  }
}
