import { type Chain, defineChain } from "viem";

/** A viem chain definition for a local node: `chainId` served at `rpcUrl`, paid in ETH. */
export function localChainDefinition(rpcUrl: string, chainId: number): Chain {
  return defineChain({
    id: chainId,
    name: `pgtoll local chain ${chainId}`,
    nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 },
    rpcUrls: { default: { http: [rpcUrl] } },
  });
}
