import pg from "pg";
import type { Address, Hex } from "viem";
import { parseMicro } from "../billing/money.js";
import { takeFlags, UsageError } from "../command-flags.js";
import { type Config, loadConfig } from "../config.js";
import { deriveDevAccounts } from "../devchain/index.js";
import { AGENT_KEY_VARIABLE, readAgentKey } from "../proxy/agent-token-command.js";
import { sendTokenTransfer } from "./demo-transfer.js";
import type { DevState } from "./dev-state.js";
import { chainDownError, devChainEndpoint, devClusterUrl, runningDevStack } from "./running-dev-stack.js";

export const DEV_TRANSFER_USAGE = `Usage: pgtoll dev-transfer --amount USDC [--provider ID | --to WALLET] [--data-dir DIR]

Sends USDC amount (e.g. 5 or 0.25) of dev USDC on the local chain of the \`pgtoll dev\` running on the data
directory, waits until it is mined, and prints the transaction hash, ready for POST /api/deposit.

  --provider ID   to the wallet provider ID registered (default: the sample provider)
  --to WALLET     to this address
From the wallet whose key is in ${AGENT_KEY_VARIABLE} when it is set (e.g. one made by pgtoll dev-wallet
--usdc), else from the demo agent.
`;

/** The wallet provider `id` of the dev stack's metadata database registered; throws when there is none. */
async function providerWallet(config: Config, state: DevState, id: string): Promise<Address> {
  if (id === state.providerId) return state.providerWallet;
  if (!/^[0-9a-f-]{36}$/i.test(id))
    throw new UsageError(`--provider must be a provider id (a UUID), got "${id}"`);
  const db = new pg.Client({
    connectionString: await devClusterUrl(config, state, "name the wallet with --to"),
  });
  await db.connect();
  try {
    const { rows } = await db.query<{ wallet_address: Address }>(
      "SELECT wallet_address FROM providers WHERE id = $1",
      [id],
    );
    if (!rows[0]) throw new Error(`no provider ${id} is registered with this pgtoll dev`);
    return rows[0].wallet_address;
  } finally {
    await db.end();
  }
}

/**
 * `pgtoll dev-transfer --amount USDC`: a real token transfer on `pgtoll dev`'s chain, to a provider's wallet.
 * Returns the transaction hash. Throws when no `pgtoll dev` runs on the data directory.
 */
export async function devTransferCommand(argv: readonly string[], env: NodeJS.ProcessEnv): Promise<string> {
  const flags = { amount: "value", provider: "value", to: "value", help: "boolean" } as const;
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
  if (values.provider !== undefined && values.to !== undefined)
    throw new UsageError("give --provider or --to, not both");
  if (typeof values.to === "string" && !/^0x[0-9a-fA-F]{40}$/.test(values.to))
    throw new UsageError(`--to must be a wallet address (0x and 40 hex digits), got "${values.to}"`);
  const fromKey: Hex | undefined = env[AGENT_KEY_VARIABLE] ? readAgentKey(env) : undefined;
  const state = await runningDevStack(config);
  const to =
    typeof values.to === "string"
      ? (values.to as Address)
      : await providerWallet(
          config,
          state,
          typeof values.provider === "string" ? values.provider : state.providerId,
        );
  const agentKey =
    fromKey ?? deriveDevAccounts(state.agentAccountIndex + 1)[state.agentAccountIndex]!.privateKey;
  try {
    return await sendTokenTransfer(devChainEndpoint(state), agentKey, state.tokenAddress, to, amountMicro);
  } catch (error) {
    throw chainDownError(state, error);
  }
}
