import { encodeErrorResponse } from "./serializer.js";

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
