import { x402Client } from "@x402/core/client";
import { ExactEvmScheme } from "@x402/evm/exact/client";
import { wrapFetchWithPayment } from "@x402/fetch";
import type { LocalAccount } from "viem";

export interface PayingFetchOptions {
  chainId: number;
  /** The token pgtoll asks to be paid in; x402 clients pay only tokens they are told to (or their network's USDC). */
  tokenAddress: string;
  /** Most one payment may carry, in micro-USDC: the client refuses to sign more. */
  maxPaymentMicro: bigint;
  /** The `fetch` the requests go through (default: the global one), e.g. to see what was signed. */
  fetch?: typeof fetch;
}

/**
 * `fetch` that pays pgtoll's 402s with x402 (the official client, `exact` scheme), signing with `account`. A
 * request answered 402 with PAYMENT-REQUIRED is signed for and sent once more with PAYMENT-SIGNATURE.
 */
export function payingFetch(account: LocalAccount, options: PayingFetchOptions): typeof fetch {
  const network = `eip155:${options.chainId}` as const;
  const client = x402Client.fromConfig({
    schemes: [{ network, client: new ExactEvmScheme(account) }],
    spendControls: {
      allowedAssets: [
        { network, asset: options.tokenAddress, maxAmountPerPayment: options.maxPaymentMicro.toString() },
      ],
    },
  });
  return wrapFetchWithPayment(options.fetch ?? fetch, client) as typeof fetch;
}
