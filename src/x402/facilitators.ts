import { x402Facilitator } from "@x402/core/facilitator";
import { type FacilitatorClient, HTTPFacilitatorClient } from "@x402/core/server";
import type { SupportedResponse } from "@x402/core/types";
import { toFacilitatorEvmSigner } from "@x402/evm";
import { registerExactEvmScheme } from "@x402/evm/exact/facilitator";
import { createWalletClient, defineChain, http, nonceManager, publicActions } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { networkOf } from "./payment-terms.js";

/** Where x402 payments are verified and settled: pgtoll itself with a gas key, or a facilitator's HTTP API. */
export interface FacilitatorSettings {
  chainId: number;
  rpcUrl: string;
  /**
   * Private key of the account that submits `transferWithAuthorization` and pays its gas.
   * WARNING: a hot key held by the process; fund it with gas money only (it never holds the agents' USDC).
   */
  settlerKey?: `0x${string}`;
  /** A facilitator's base URL (its `/verify` and `/settle`). */
  facilitatorUrl?: string;
  /** Longest wait for one RPC request. Default 10 000 ms. */
  rpcTimeoutMs?: number;
  /** Longest wait for a settlement's receipt. Default 30 000 ms. */
  confirmationTimeoutMs?: number;
}

/**
 * The facilitator pgtoll verifies and settles with, or null when x402 is off (neither a settler key nor a URL).
 * Both kinds are x402's own code: `x402Facilitator` with the `exact` EVM scheme (it checks the EIP-712 signature,
 * the window, the recipient, the amount and the token, simulates the transfer, submits it and checks the
 * receipt's Transfer log), or `HTTPFacilitatorClient` speaking a facilitator's API.
 */
export function createFacilitator(settings: FacilitatorSettings): FacilitatorClient | null {
  if (settings.facilitatorUrl) return new HTTPFacilitatorClient({ url: settings.facilitatorUrl });
  if (!settings.settlerKey) return null;
  // Settlements run concurrently: the nonce manager gives each its own transaction nonce.
  const account = privateKeyToAccount(settings.settlerKey, { nonceManager });
  const client = createWalletClient({
    account,
    chain: defineChain({
      id: settings.chainId,
      name: `chain ${settings.chainId}`,
      nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 },
      rpcUrls: { default: { http: [settings.rpcUrl] } },
    }),
    transport: http(settings.rpcUrl, { timeout: settings.rpcTimeoutMs ?? 10_000, retryCount: 1 }),
    pollingInterval: 250,
    cacheTime: 0,
  }).extend(publicActions);
  const signer = toFacilitatorEvmSigner(
    {
      address: account.address,
      readContract: (args) =>
        client.readContract({ ...args, args: args.args ?? [] } as Parameters<typeof client.readContract>[0]),
      verifyTypedData: (args) => client.verifyTypedData(args as Parameters<typeof client.verifyTypedData>[0]),
      writeContract: (args) =>
        client.writeContract({ ...args, args: args.args ?? [] } as Parameters<
          typeof client.writeContract
        >[0]),
      sendTransaction: (args) => client.sendTransaction(args),
      waitForTransactionReceipt: (args) => client.waitForTransactionReceipt(args),
      getCode: (args) => client.getCode(args),
    },
    { confirmationTimeoutMs: settings.confirmationTimeoutMs ?? 30_000 },
  );
  const facilitator = new x402Facilitator();
  registerExactEvmScheme(facilitator, { signer, networks: networkOf(settings) });
  return {
    verify: (payload, requirements) => facilitator.verify(payload, requirements),
    settle: (payload, requirements) => facilitator.settle(payload, requirements),
    // Its networks are the one registered above, a CAIP-2 name by construction.
    getSupported: async () => facilitator.getSupported() as SupportedResponse,
  };
}
