import { type Address, erc20Abi, type Hash, type Hex } from "viem";
import { type ChainEndpoint, localClients } from "../devchain/index.js";

/**
 * Sends `amountMicro` of the 6-decimal token at `token` from the key's account to `to` on a local chain and
 * waits until it is mined. Returns the transaction hash. Throws with viem's short reason when the transfer
 * cannot be sent (e.g. beyond the balance) or reverts.
 */
export async function sendTokenTransfer(
  endpoint: ChainEndpoint,
  fromKey: Hex,
  token: Address,
  to: Address,
  amountMicro: bigint,
): Promise<Hash> {
  const { walletClient, publicClient } = localClients(endpoint, fromKey);
  let hash: Hash;
  try {
    hash = await walletClient.writeContract({
      address: token,
      abi: erc20Abi,
      functionName: "transfer",
      args: [to, amountMicro],
    });
  } catch (error) {
    const reason = (error as { shortMessage?: string }).shortMessage ?? (error as Error).message;
    throw new Error(`the token transfer could not be sent: ${reason}`);
  }
  const receipt = await publicClient.waitForTransactionReceipt({ hash, timeout: 30_000 });
  if (receipt.status !== "success") throw new Error(`the token transfer ${hash} reverted`);
  return hash;
}
