import {
  type Address,
  createPublicClient,
  createWalletClient,
  erc20Abi,
  type Hash,
  type Hex,
  http,
} from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { formatMicro, parseMicro } from "../billing/money.js";
import { postJson, RestCallError } from "../dev/rest-client.js";
import { localChainDefinition } from "../devchain/chain-definition.js";

/** The chain and token deposits are made on: pgtoll's own settings (`PGTOLL_RPC_URL` ...). */
export interface DepositChain {
  rpcUrl: string;
  chainId: number;
  tokenAddress: Address;
}

export interface ChainDepositOptions {
  chain: DepositChain;
  agentKey: Hex;
  providerId: string;
  /** pgtoll's HTTP API, which credits the transfer. */
  httpUrl: string;
  /** Most USDC (micro) one call may send. */
  maxMicro: bigint;
  depositAddress(): Promise<string>;
  token(): Promise<string>;
  /** How long to wait for pgtoll to see the transfer's confirmations (default 3 minutes). */
  confirmTimeoutMs?: number;
}

/**
 * Sends USDC from the agent's wallet to the provider's and credits it through `POST /api/deposit`, retrying
 * while the transfer has fewer confirmations than pgtoll requires. The transfer is signed locally with the
 * agent's key; nothing but the transaction hash leaves the machine.
 */
export function chainDeposit(options: ChainDepositOptions) {
  const { chain, agentKey, providerId, maxMicro } = options;
  const account = privateKeyToAccount(agentKey);
  const definition = localChainDefinition(chain.rpcUrl, chain.chainId);
  const transport = http(chain.rpcUrl, { retryCount: 1 });
  const publicClient = createPublicClient({ chain: definition, transport, pollingInterval: 500 });
  const walletClient = createWalletClient({ chain: definition, transport, account });

  async function credit(txHash: Hash): Promise<string> {
    const deadline = Date.now() + (options.confirmTimeoutMs ?? 180_000);
    for (;;) {
      try {
        const answer = await postJson<{ balance: string }>(
          `${options.httpUrl}/api/deposit`,
          { txHash, agentWallet: account.address.toLowerCase(), providerId },
          { authorization: `Bearer ${await options.token()}` },
        );
        return answer.balance;
      } catch (error) {
        const waiting =
          error instanceof RestCallError && error.status === 402 && /confirmations/.test(error.message);
        if (!waiting || Date.now() > deadline) throw error;
        await new Promise((resolve) => setTimeout(resolve, 1000));
      }
    }
  }

  return {
    maxMicro,
    async send(amount: string) {
      const amountMicro = parseMicro(amount);
      if (amountMicro === null || amountMicro <= 0n)
        throw new Error(`amount must be a positive USDC amount with at most 6 decimals, got "${amount}"`);
      if (amountMicro > maxMicro)
        throw new Error(
          `at most ${formatMicro(maxMicro)} USDC per deposit (PGTOLL_MCP_DEPOSIT_MAX), asked ${amount}`,
        );
      const to = (await options.depositAddress()) as Address;
      let txHash: Hash;
      try {
        txHash = await walletClient.writeContract({
          address: chain.tokenAddress,
          abi: erc20Abi,
          functionName: "transfer",
          args: [to, amountMicro],
        });
      } catch (error) {
        const reason = (error as { shortMessage?: string }).shortMessage ?? (error as Error).message;
        throw new Error(`the USDC transfer could not be sent, nothing was spent: ${reason}`);
      }
      const receipt = await publicClient.waitForTransactionReceipt({ hash: txHash, timeout: 120_000 });
      if (receipt.status !== "success")
        throw new Error(`the USDC transfer ${txHash} reverted; nothing was credited`);
      try {
        return { txHash, amount: formatMicro(amountMicro), balance: await credit(txHash) };
      } catch (error) {
        const reason = error instanceof Error ? error.message : String(error);
        throw new Error(
          `the USDC transfer ${txHash} was mined but pgtoll did not credit it yet (${reason}); ` +
            "credit it later with POST /api/deposit and this transaction hash",
        );
      }
    },
  };
}
