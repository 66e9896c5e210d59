import { type Chain, createTestClient, http, publicActions } from "viem";
import { localChainDefinition } from "./chain-definition.js";
import { DEV_MNEMONIC, type DevAccount, deriveDevAccounts } from "./dev-accounts.js";
import { startHardhatNode } from "./hardhat-node.js";

/** Chain id of Base mainnet, which the local chain impersonates by default. */
export const BASE_CHAIN_ID = 8453;

/** Options of {@link startLocalChain}. */
export interface LocalChainOptions {
  /** TCP port on 127.0.0.1; 0 or undefined picks a free one. */
  port?: number;
  /** Chain id reported by eth_chainId. Default 8453 (Base). */
  chainId?: number;
  /** Number of funded accounts (10 000 ETH each). Default 10. */
  accountCount?: number;
  /** How long to wait for the node to accept requests. Default 60 000 ms. */
  startTimeoutMs?: number;
}

/** A running local EVM chain (hardhat node child process). */
export interface LocalChain {
  /** JSON-RPC endpoint, e.g. `http://127.0.0.1:41234`. */
  readonly rpcUrl: string;
  readonly chainId: number;
  /** viem chain definition for `chainId` at `rpcUrl`. */
  readonly chain: Chain;
  /**
   * Funded accounts derived from hardhat's default mnemonic.
   * WARNING: their private keys are public; never use them on a real network.
   */
  readonly accounts: readonly DevAccount[];
  /** Process id of the node. */
  readonly pid: number;
  /** Mines `blocks` empty blocks at once (hardhat_mine). Default 1. */
  mine(blocks?: number): Promise<void>;
  /** Turns mining on every transaction on or off (evm_setAutomine). */
  setAutomine(enabled: boolean): Promise<void>;
  /** Mines a block every `intervalMs` (evm_setIntervalMining); 0 turns interval mining off. */
  setIntervalMining(intervalMs: number): Promise<void>;
  /** Number of the latest block. */
  blockNumber(): Promise<bigint>;
  /** Kills the node and waits for it to exit. Safe to call more than once. */
  stop(): Promise<void>;
}

/**
 * Starts a local hardhat JSON-RPC node on 127.0.0.1, automining, with chain id 8453 by default.
 * The node is a child process that exits with its owner, even when the owner is killed; still,
 * call `stop()` when done.
 * WARNING: for tests and `pgtoll dev` only; it needs the `hardhat` dev dependency.
 */
export async function startLocalChain(options: LocalChainOptions = {}): Promise<LocalChain> {
  const chainId = options.chainId ?? BASE_CHAIN_ID;
  const accountCount = options.accountCount ?? 10;
  if (!Number.isSafeInteger(chainId) || chainId <= 0) throw new TypeError(`invalid chain id: ${chainId}`);
  if (!Number.isSafeInteger(accountCount) || accountCount < 1) {
    throw new TypeError(`invalid account count: ${accountCount}`);
  }

  const node = await startHardhatNode(
    { chainId, mnemonic: DEV_MNEMONIC, accountCount },
    options.port ?? 0,
    options.startTimeoutMs ?? 60_000,
  );
  const chain = localChainDefinition(node.rpcUrl, chainId);
  const testClient = createTestClient({
    mode: "hardhat",
    chain,
    transport: http(node.rpcUrl, { retryCount: 0 }),
    cacheTime: 0,
  }).extend(publicActions);

  return {
    rpcUrl: node.rpcUrl,
    chainId,
    chain,
    accounts: Object.freeze(deriveDevAccounts(accountCount)),
    pid: node.pid,
    mine: (blocks = 1) => testClient.mine({ blocks }),
    setAutomine: (enabled) => testClient.setAutomine(enabled),
    // Raw call: viem's setIntervalMining takes seconds, hardhat takes milliseconds.
    setIntervalMining: (intervalMs) =>
      testClient.request({ method: "evm_setIntervalMining", params: [intervalMs] }),
    blockNumber: () => testClient.getBlockNumber({ cacheTime: 0 }),
    stop: () => node.stop(),
  };
}
