import {
  type Abi,
  type Address,
  type Chain,
  createPublicClient,
  createWalletClient,
  type Hash,
  type Hex,
  http,
} from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { compileTestUsdc } from "./compile-test-usdc.js";

/** What the token helpers need to know about a chain (a `LocalChain` fits). */
export interface ChainEndpoint {
  rpcUrl: string;
  chain: Chain;
}

/** A deployed dev token. */
export interface TestToken {
  address: Address;
  abi: Abi;
}

/** A token given by its deployment or by its address. */
export type TokenRef = TestToken | Address;

const RECEIPT_TIMEOUT_MS = 30_000;

/** viem clients signing with `privateKey` on `endpoint`, polling fast as a local node allows. */
export function localClients(endpoint: ChainEndpoint, privateKey: Hex) {
  const account = privateKeyToAccount(privateKey);
  const transport = http(endpoint.rpcUrl, { retryCount: 0 });
  const common = { chain: endpoint.chain, transport, pollingInterval: 50, cacheTime: 0 };
  return {
    account,
    publicClient: createPublicClient(common),
    walletClient: createWalletClient({ ...common, account }),
  };
}

/**
 * Deploys a fresh TestUSDC ("USD Coin", USDC, 6 decimals, EIP-3009 like Base's USDC) and waits
 * for it to be mined.
 * WARNING: waits for the receipt, so the chain must be mining (automine or interval).
 */
export async function deployTestToken(endpoint: ChainEndpoint, deployerKey: Hex): Promise<TestToken> {
  const { abi, bytecode } = await compileTestUsdc();
  const { publicClient, walletClient } = localClients(endpoint, deployerKey);
  const hash = await walletClient.deployContract({ abi, bytecode });
  const receipt = await publicClient.waitForTransactionReceipt({ hash, timeout: RECEIPT_TIMEOUT_MS });
  if (receipt.status !== "success" || !receipt.contractAddress) {
    throw new Error(`TestUSDC deployment failed (tx ${hash})`);
  }
  return { address: receipt.contractAddress, abi };
}

/** Mints `amount` micro-USDC to `to` (minting is open to anyone). Returns the tx hash. */
export async function mintTokens(
  endpoint: ChainEndpoint,
  minterKey: Hex,
  token: TokenRef,
  to: Address,
  amount: bigint,
): Promise<Hash> {
  return write(endpoint, minterKey, token, "mint", [to, amount]);
}

/**
 * Transfers `amount` micro-USDC from the key's account to `to`. Returns the tx hash without
 * waiting for the receipt. Pass `gas` to skip estimation: a transfer beyond the balance is then
 * sent anyway, mined, and reverts.
 */
export async function transferTokens(
  endpoint: ChainEndpoint,
  fromKey: Hex,
  token: TokenRef,
  to: Address,
  amount: bigint,
  options: { gas?: bigint } = {},
): Promise<Hash> {
  return write(endpoint, fromKey, token, "transfer", [to, amount], options.gas);
}

/** Several transfers in one transaction (one Transfer log each). Returns the tx hash. */
export async function transferTokensBatch(
  endpoint: ChainEndpoint,
  fromKey: Hex,
  token: TokenRef,
  transfers: readonly { to: Address; amount: bigint }[],
): Promise<Hash> {
  const recipients = transfers.map((t) => t.to);
  const amounts = transfers.map((t) => t.amount);
  return write(endpoint, fromKey, token, "transferBatch", [recipients, amounts]);
}

/** Token balance of `owner`, in micro-USDC. */
export async function tokenBalance(
  endpoint: ChainEndpoint,
  token: TokenRef,
  owner: Address,
): Promise<bigint> {
  const { abi } = await compileTestUsdc();
  const publicClient = createPublicClient({ chain: endpoint.chain, transport: http(endpoint.rpcUrl) });
  const balance = await publicClient.readContract({
    address: tokenAddress(token),
    abi,
    functionName: "balanceOf",
    args: [owner],
  });
  return balance as bigint;
}

async function write(
  endpoint: ChainEndpoint,
  key: Hex,
  token: TokenRef,
  functionName: string,
  args: readonly unknown[],
  gas?: bigint,
): Promise<Hash> {
  const { abi } = await compileTestUsdc();
  const { walletClient } = localClients(endpoint, key);
  return walletClient.writeContract({ address: tokenAddress(token), abi, functionName, args, gas });
}

function tokenAddress(token: TokenRef): Address {
  return typeof token === "string" ? token : token.address;
}
