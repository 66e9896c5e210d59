import { parseMicro } from "../billing/money.js";
import { takeFlags, UsageError } from "../command-flags.js";
import { loadConfig } from "../config.js";
import { deriveDevAccounts, localChainDefinition } from "../devchain/index.js";
import { sendTokenTransfer } from "./demo-transfer.js";
import { readDevState } from "./dev-state.js";

export const DEV_TRANSFER_USAGE = `Usage: pgtoll dev-transfer --amount USDC [--data-dir DIR]

Sends USDC amount (e.g. 5 or 0.25) of dev USDC from the demo agent to the sample provider's wallet on the
local chain of the \`pgtoll dev\` running on the data directory, waits until it is mined, and prints the
transaction hash, ready for POST /api/deposit.
`;

/**
 * `pgtoll dev-transfer --amount USDC`: a real token transfer on `pgtoll dev`'s chain from the demo agent to the
 * sample provider. Returns the transaction hash. Throws when no `pgtoll dev` runs on the data directory.
 */
export async function devTransferCommand(argv: readonly string[], env: NodeJS.ProcessEnv): Promise<string> {
  const flags = { amount: "value", help: "boolean" } as const;
  const { values, rest } = takeFlags(argv, flags);
  if (values.help) return DEV_TRANSFER_USAGE.trimEnd();
  const config = loadConfig(env, rest, Object.keys(flags));
  if (typeof values.amount !== "string")
    throw new UsageError(`--amount is required\n\n${DEV_TRANSFER_USAGE}`);
  const amountMicro = parseMicro(values.amount);
  if (amountMicro === null || amountMicro <= 0n) {
    throw new UsageError(
      `--amount must be a positive USDC amount with at most 6 decimals, got "${values.amount}"`,
    );
  }
  const state = await readDevState(config.dataDir);
  if (!state) {
    throw new Error(
      `no pgtoll dev is running on the data directory ${config.dataDir} (start one with npm run dev)`,
    );
  }
  const agent = deriveDevAccounts(state.agentAccountIndex + 1)[state.agentAccountIndex]!;
  const endpoint = { rpcUrl: state.rpcUrl, chain: localChainDefinition(state.rpcUrl, state.chainId) };
  try {
    return await sendTokenTransfer(
      endpoint,
      agent.privateKey,
      state.tokenAddress,
      state.providerWallet,
      amountMicro,
    );
  } catch (error) {
    const message = (error as Error).message;
    if (/fetch failed|ECONNREFUSED|HTTP request failed/i.test(message)) {
      throw new Error(`the local chain at ${state.rpcUrl} does not answer: is pgtoll dev still running?`);
    }
    throw error;
  }
}
