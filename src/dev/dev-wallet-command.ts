import { erc20Abi, parseAbi, parseEther } from "viem";
import { generatePrivateKey, privateKeyToAddress } from "viem/accounts";
import { formatMicro, parseMicro } from "../billing/money.js";
import { takeFlags, UsageError } from "../command-flags.js";
import { loadConfig } from "../config.js";
import { deriveDevAccounts, localClients } from "../devchain/index.js";
import { DEV_ACCOUNT } from "./demo-defaults.js";
import { chainDownError, devChainEndpoint, runningDevStack } from "./running-dev-stack.js";

export const DEV_WALLET_USAGE = `Usage: pgtoll dev-wallet [--usdc USDC] [--data-dir DIR]

Makes a new wallet (a random private key) and prints two shell assignments, WALLET=<address> and
KEY=<private key>, for eval "$(pgtoll dev-wallet …)". Alone it needs nothing else: an address to receive a
provider's earnings. With --usdc it funds the wallet on the local chain of the \`pgtoll dev\` running on the
data directory: gas (1 ETH from a dev account) and that much dev USDC, minted, so the wallet can pay a
provider with dev-transfer as an agent. Keep the key; the dev chain is new on every run of pgtoll dev.
`;

/** Gas for the new wallet's transfers: far more than a dev session spends. */
const GAS_FUNDS = parseEther("1");

/**
 * `pgtoll dev-wallet [--usdc USDC]`: a fresh key, funded on the dev chain when asked. Returns the `WALLET=` and
 * `KEY=` lines.
 */
export async function devWalletCommand(argv: readonly string[], env: NodeJS.ProcessEnv): Promise<string> {
  const flags = { usdc: "value", help: "boolean" } as const;
  const { values, rest } = takeFlags(argv, flags);
  if (values.help) return DEV_WALLET_USAGE.trimEnd();
  const config = loadConfig(env, rest, Object.keys(flags));
  const key = generatePrivateKey();
  const wallet = privateKeyToAddress(key);
  if (typeof values.usdc === "string") {
    const amountMicro = parseMicro(values.usdc);
    if (amountMicro === null || amountMicro <= 0n) {
      throw new UsageError(
        `--usdc must be a positive USDC amount with at most 6 decimals, got "${values.usdc}"`,
      );
    }
    const state = await runningDevStack(config);
    const funder = deriveDevAccounts(DEV_ACCOUNT.funder + 1)[DEV_ACCOUNT.funder]!;
    const { walletClient, publicClient } = localClients(devChainEndpoint(state), funder.privateKey);
    try {
      const gas = await walletClient.sendTransaction({ to: wallet, value: GAS_FUNDS });
      await publicClient.waitForTransactionReceipt({ hash: gas, timeout: 30_000 });
      // Minting is open on the dev token: anyone may mint, as a faucet would give.
      const minted = await walletClient.writeContract({
        address: state.tokenAddress,
        abi: parseAbi(["function mint(address to, uint256 amount)"]),
        functionName: "mint",
        args: [wallet, amountMicro],
      });
      const receipt = await publicClient.waitForTransactionReceipt({ hash: minted, timeout: 30_000 });
      if (receipt.status !== "success")
        throw new Error(`minting dev USDC to ${wallet} reverted (tx ${minted})`);
      const balance = await publicClient.readContract({
        address: state.tokenAddress,
        abi: erc20Abi,
        functionName: "balanceOf",
        args: [wallet],
      });
      if (balance !== amountMicro) {
        throw new Error(`${wallet} holds ${formatMicro(balance)} dev USDC, not ${formatMicro(amountMicro)}`);
      }
    } catch (error) {
      throw chainDownError(state, error);
    }
  }
  return `WALLET=${wallet.toLowerCase()}\nKEY=${key}`;
}
