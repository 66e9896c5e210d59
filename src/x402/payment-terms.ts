import type { PaymentRequired, PaymentRequirements } from "@x402/core/types";
import { getAddress } from "viem";

/** What pgtoll offers x402 clients: one scheme (`exact`), one network, one token. */
export interface X402Terms {
  chainId: number;
  /** The USDC contract (`PGTOLL_TOKEN_ADDRESS`). */
  tokenAddress: `0x${string}`;
  /** The token's EIP-712 domain, which the client signs over (Base's USDC: "USD Coin", "2"). */
  tokenName: string;
  tokenVersion: string;
  minTopupMicro: bigint;
  maxTopupMicro: bigint;
}

/**
 * How long a signed authorization may take to reach pgtoll: the client sets `validBefore` this far ahead. Long
 * enough for a query's retry, short enough that a leaked PAYMENT-SIGNATURE is soon worthless.
 */
export const MAX_TIMEOUT_SECONDS = 120;

/**
 * How far the agent's clock may be from pgtoll's when it sets an authorization's window: `validBefore` may reach
 * this far past the offer's `MAX_TIMEOUT_SECONDS`, and `validAfter` this far into the future.
 */
export const AUTHORIZATION_CLOCK_SKEW_SECONDS = 30;

export const X402_VERSION = 2;

/** The network of `terms` in CAIP-2 form, as x402 v2 names networks. */
export function networkOf(terms: Pick<X402Terms, "chainId">): `eip155:${number}` {
  return `eip155:${terms.chainId}`;
}

/** The one payment pgtoll accepts for `amountMicro` paid to `payTo` (a provider's wallet). */
export function paymentRequirements(
  terms: X402Terms,
  payTo: string,
  amountMicro: bigint,
): PaymentRequirements {
  return {
    scheme: "exact",
    network: networkOf(terms),
    asset: getAddress(terms.tokenAddress),
    amount: amountMicro.toString(),
    payTo: getAddress(payTo),
    maxTimeoutSeconds: MAX_TIMEOUT_SECONDS,
    extra: { name: terms.tokenName, version: terms.tokenVersion },
  };
}

/** The PAYMENT-REQUIRED object: why, for what resource, and the one way to pay. */
export function paymentRequired(
  error: string,
  resource: { url: string; description: string; serviceName?: string; tags?: string[] },
  requirements: PaymentRequirements,
  extensions?: Record<string, unknown>,
): PaymentRequired {
  return {
    x402Version: X402_VERSION,
    error,
    resource: { ...resource, mimeType: "application/json" },
    accepts: [requirements],
    ...(extensions ? { extensions } : {}),
  };
}

/**
 * What a query that the balance cannot pay asks for: its estimated cost, at least the minimum top-up (so that an
 * agent does not pay a settlement for every cheap query) and at most the maximum (a larger query needs a
 * deposit, or several top-ups).
 */
export function queryTopUpMicro(terms: X402Terms, estimatedCostMicro: bigint): bigint {
  const wanted = estimatedCostMicro > terms.minTopupMicro ? estimatedCostMicro : terms.minTopupMicro;
  return wanted < terms.maxTopupMicro ? wanted : terms.maxTopupMicro;
}
