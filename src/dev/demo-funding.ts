import type { Address, Hash, Hex } from "viem";
import type { ChainEndpoint } from "../devchain/index.js";
import { sendTokenTransfer } from "./demo-transfer.js";
import { postJson } from "./rest-client.js";

export interface DemoDeposit {
  txHash: Hash;
  /** The agent's balance with the provider after the deposit, as the API formats it. */
  balance: string;
}

/**
 * Funds the demo agent the way an agent would: a real token transfer on chain from its wallet to the provider's,
 * then `POST /api/deposit` with the transaction hash, over real HTTP. `headers` carries an agent token when the
 * REST gateway asks for one (PGTOLL_REST_AGENT_AUTH=signature).
 */
export async function fundDemoAgent(options: {
  endpoint: ChainEndpoint;
  token: Address;
  agentKey: Hex;
  agentWallet: string;
  providerWallet: Address;
  providerId: string;
  amountMicro: bigint;
  httpUrl: string;
  headers?: Record<string, string>;
}): Promise<DemoDeposit> {
  const txHash = await sendTokenTransfer(
    options.endpoint,
    options.agentKey,
    options.token,
    options.providerWallet,
    options.amountMicro,
  );
  const result = await postJson<{ balance: string }>(
    `${options.httpUrl}/api/deposit`,
    { txHash, agentWallet: options.agentWallet, providerId: options.providerId },
    options.headers,
  );
  return { txHash, balance: result.balance };
}
