import {
  BaseError,
  createPublicClient,
  defineChain,
  getAddress,
  HttpRequestError,
  http,
  TimeoutError,
  TransactionNotFoundError,
  type TransactionReceipt,
  TransactionReceiptNotFoundError,
} from "viem";
import { decodeTransfers, sumDepositTransfers } from "./deposit-transfers.js";

/** Where and how deposits are verified. */
export interface ChainSettings {
  /** JSON-RPC endpoint of the chain. */
  rpcUrl: string;
  /** Chain id the RPC must report (8453 for Base mainnet). */
  chainId: number;
  /** The accepted token contract (USDC). */
  tokenAddress: `0x${string}`;
  /** Blocks needed, counting the one holding the transaction (1 = mined). */
  minConfirmations: number;
  /** Per-request timeout. Default 10 000 ms. */
  rpcTimeoutMs?: number;
  /** Retries of a failed request (connection error, timeout, 5xx). Default 1; never unbounded. */
  rpcRetryCount?: number;
}

export type DepositVerification =
  | { ok: true; amountMicro: bigint; blockNumber: bigint; confirmations: bigint; from: string; to: string }
  | {
      ok: false;
      reason:
        | "not_found"
        | "reverted"
        | "no_matching_transfer"
        | "insufficient_confirmations"
        | "wrong_chain";
      message: string;
    };

export interface ChainVerifier {
  /**
   * Checks that `txHash` is a successful, sufficiently confirmed transaction on the configured
   * chain whose token Transfer events move tokens from `agentWallet` to `providerWallet`, and
   * returns their sum in micro-USDC.
   * Throws {@link ChainUnavailableError} when the RPC cannot be reached or fails: nothing may be
   * credited then. Throws TypeError on a malformed hash or wallet (validate them first).
   */
  verifyDeposit(
    txHash: `0x${string}`,
    agentWallet: string,
    providerWallet: string,
    options?: VerifyOptions,
  ): Promise<DepositVerification>;
  /** Asks the RPC for the latest block; throws {@link ChainUnavailableError} when it cannot be reached. */
  probe(): Promise<void>;
}

export interface VerifyOptions {
  /**
   * Blocks needed for this transaction instead of the configured count: 1 for a transfer pgtoll's facilitator
   * itself just settled (x402), whose receipt it waited for.
   */
  minConfirmations?: number;
}

/** The chain RPC could not be reached or failed; the deposit is neither accepted nor refused. */
export class ChainUnavailableError extends Error {
  override readonly name = "ChainUnavailableError";
}

const TX_HASH = /^0x[0-9a-fA-F]{64}$/;
const ADDRESS = /^0x[0-9a-fA-F]{40}$/;
const CHAIN_ID_RECHECK_MS = 60_000;

/**
 * Creates a deposit verifier over one RPC endpoint (viem, HTTP). The RPC's chain id is checked on
 * first use and cached once it answers. A request is bounded by `rpcTimeoutMs` and retried at most
 * `rpcRetryCount` times, so one verification makes at most 4 x (1 + retries) requests.
 */
export function createChainVerifier(settings: ChainSettings): ChainVerifier {
  const { chainId } = settings;
  if (!Number.isSafeInteger(chainId) || chainId <= 0) throw new TypeError(`invalid chain id: ${chainId}`);
  if (!Number.isSafeInteger(settings.minConfirmations) || settings.minConfirmations < 0) {
    throw new TypeError(`invalid minConfirmations: ${settings.minConfirmations}`);
  }
  if (!ADDRESS.test(settings.tokenAddress))
    throw new TypeError(`invalid token address: ${settings.tokenAddress}`);
  // Only the origin goes into messages: providers often put an API key in the URL path.
  const rpcOrigin = new URL(settings.rpcUrl).origin;

  const client = createPublicClient({
    chain: defineChain({
      id: chainId,
      name: `chain ${chainId}`,
      nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 },
      rpcUrls: { default: { http: [settings.rpcUrl] } },
    }),
    transport: http(settings.rpcUrl, {
      timeout: settings.rpcTimeoutMs ?? 10_000,
      retryCount: settings.rpcRetryCount ?? 1,
      retryDelay: 200,
    }),
    // Confirmations are counted from the latest block: never reuse a cached block number.
    cacheTime: 0,
  });

  const rpc = async <T>(what: string, call: () => Promise<T>): Promise<T> => {
    try {
      return await call();
    } catch (error) {
      throw unavailable(error, what, rpcOrigin);
    }
  };

  /**
   * When the RPC last reported the configured chain id. Remembered only once it matches (an RPC that served the
   * wrong chain may be fixed without a restart) and only for a minute (one behind a load balancer may start
   * serving another chain), so it costs one extra RPC call a minute, not one per deposit.
   */
  let chainIdMatchedAt = Number.NEGATIVE_INFINITY;

  async function verifyDeposit(
    txHash: `0x${string}`,
    agentWallet: string,
    providerWallet: string,
    options: VerifyOptions = {},
  ): Promise<DepositVerification> {
    const minConfirmations = options.minConfirmations ?? settings.minConfirmations;
    if (!TX_HASH.test(txHash)) throw new TypeError(`invalid transaction hash: ${txHash}`);
    if (!ADDRESS.test(agentWallet)) throw new TypeError(`invalid agent wallet: ${agentWallet}`);
    if (!ADDRESS.test(providerWallet)) throw new TypeError(`invalid provider wallet: ${providerWallet}`);

    const chainIdFresh = Date.now() - chainIdMatchedAt < CHAIN_ID_RECHECK_MS;
    const reportedChainId = chainIdFresh ? chainId : await rpc("eth_chainId", () => client.getChainId());
    chainIdMatchedAt =
      reportedChainId === chainId ? (chainIdFresh ? chainIdMatchedAt : Date.now()) : Number.NEGATIVE_INFINITY;
    if (reportedChainId !== chainId) {
      return {
        ok: false,
        reason: "wrong_chain",
        message: `the chain RPC serves chain id ${reportedChainId}, deposits are accepted on chain id ${chainId}`,
      };
    }

    const receipt = await rpc("eth_getTransactionReceipt", () => receiptOrNull(txHash));
    if (!receipt) {
      const pending = await rpc("eth_getTransactionByHash", () => transactionExists(txHash));
      return pending
        ? {
            ok: false,
            reason: "insufficient_confirmations",
            message: `transaction ${txHash} is not mined yet (0 of ${minConfirmations} confirmations)`,
          }
        : {
            ok: false,
            reason: "not_found",
            message: `transaction ${txHash} was not found on chain ${chainId}`,
          };
    }
    if (receipt.status !== "success") {
      return { ok: false, reason: "reverted", message: `transaction ${txHash} reverted; it moved no tokens` };
    }

    const transfers = sumDepositTransfers(
      decodeTransfers(receipt.logs),
      settings.tokenAddress,
      agentWallet,
      providerWallet,
    );
    if (!transfers.ok) return { ok: false, reason: "no_matching_transfer", message: transfers.message };

    const latest = await rpc("eth_blockNumber", () => client.getBlockNumber({ cacheTime: 0 }));
    const confirmations = latest >= receipt.blockNumber ? latest - receipt.blockNumber + 1n : 0n;
    if (confirmations < BigInt(minConfirmations)) {
      return {
        ok: false,
        reason: "insufficient_confirmations",
        message: `transaction ${txHash} has ${confirmations} of ${minConfirmations} confirmations; retry later`,
      };
    }
    return {
      ok: true,
      amountMicro: transfers.amountMicro,
      blockNumber: receipt.blockNumber,
      confirmations,
      from: getAddress(agentWallet),
      to: getAddress(providerWallet),
    };
  }

  async function receiptOrNull(hash: `0x${string}`): Promise<TransactionReceipt | null> {
    try {
      return await client.getTransactionReceipt({ hash });
    } catch (error) {
      if (error instanceof TransactionReceiptNotFoundError) return null;
      throw error;
    }
  }

  async function transactionExists(hash: `0x${string}`): Promise<boolean> {
    try {
      await client.getTransaction({ hash });
      return true;
    } catch (error) {
      if (error instanceof TransactionNotFoundError) return false;
      throw error;
    }
  }

  async function probe(): Promise<void> {
    await rpc("eth_blockNumber", () => client.getBlockNumber({ cacheTime: 0 }));
  }

  return { verifyDeposit, probe };
}

function unavailable(error: unknown, what: string, rpcOrigin: string): ChainUnavailableError {
  const unreachable =
    error instanceof HttpRequestError || error instanceof TimeoutError || !(error instanceof BaseError);
  const detail = error instanceof BaseError ? error.shortMessage : String(error);
  const code = rootCode(error);
  const summary = unreachable ? "could not be reached" : "returned an error";
  return new ChainUnavailableError(
    `chain RPC ${rpcOrigin} ${summary} (${what}): ${detail}${code ? ` [${code}]` : ""}`,
    { cause: error },
  );
}

/** The innermost system error code (ECONNREFUSED, ETIMEDOUT...) in an error's cause chain. */
function rootCode(error: unknown): string | undefined {
  let code: string | undefined;
  for (let e: unknown = error, depth = 0; e instanceof Error && depth < 8; e = e.cause, depth++) {
    const candidate = (e as { code?: unknown }).code;
    if (typeof candidate === "string") code = candidate;
  }
  return code;
}

/** What the deposit route needs from the chain: verify one transaction. */
export interface DepositVerifier {
  verifyDeposit(
    txHash: `0x${string}`,
    agentWallet: string,
    providerWallet: string,
    options?: VerifyOptions,
  ): Promise<DepositVerification>;
  /** Throws when the chain RPC cannot be reached (a refusal may then be the RPC's fault, not the payment's). */
  probe?(): Promise<void>;
}
