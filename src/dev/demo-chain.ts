import { type Address, getContractAddress, type Hex, parseEther } from "viem";
import { generatePrivateKey, privateKeyToAddress } from "viem/accounts";
import { formatMicro } from "../billing/money.js";
import { freePort } from "../db/embedded.js";
import {
  compileTestUsdc,
  type DevAccount,
  deployTestToken,
  type LocalChain,
  localClients,
  mintTokens,
  startLocalChain,
  type TestToken,
} from "../devchain/index.js";
import { DEMO_MINT_MICRO, DEV_ACCOUNT } from "./demo-defaults.js";

/**
 * Where this run's chain will listen and its token will live, known before either exists so that pgtoll can
 * start alongside the chain.
 *
 * Why a throwaway deployer: hardhat's accounts and nonces are the same on every fresh chain, so the token's
 * address and every transfer's hash would repeat from one run to the next, and pgtoll, which credits a
 * (chain id, tx hash) once, would refuse this run's deposits as already processed. A new deployer gives a new
 * token address, which makes every transfer's hash new.
 */
export interface DemoChainPlan {
  chainId: number;
  port: number;
  rpcUrl: string;
  deployerKey: Hex;
  /** The address the deployer's first transaction creates the token at. */
  tokenAddress: Address;
}

export async function planDemoChain(chainId: number): Promise<DemoChainPlan> {
  const port = await freePort();
  const deployerKey = generatePrivateKey();
  const tokenAddress = getContractAddress({ from: privateKeyToAddress(deployerKey), nonce: 0n });
  return { chainId, port, rpcUrl: `http://127.0.0.1:${port}`, deployerKey, tokenAddress };
}

export interface DemoChain {
  chain: LocalChain;
  token: TestToken;
  /** Receives the deposits: the sample provider's wallet. */
  provider: DevAccount;
  /** Holds {@link DEMO_MINT_MICRO} of the token. WARNING: its key is public. */
  agent: DevAccount;
}

/**
 * Starts the planned local chain, gives the deployer gas, deploys the 6-decimal dev USDC at the planned
 * address and mints the demo agent's tokens. The compiler loads while the node boots.
 */
export async function startDemoChain(
  plan: DemoChainPlan,
  progress: (step: string) => void = () => {},
): Promise<DemoChain> {
  const [chain] = await Promise.all([
    startLocalChain({ chainId: plan.chainId, port: plan.port }).then((started) => {
      progress(`local chain (hardhat) up at ${started.rpcUrl}, chain id ${plan.chainId}`);
      return started;
    }),
    compileTestUsdc(),
  ]);
  try {
    const funder = chain.accounts[DEV_ACCOUNT.funder]!;
    const provider = chain.accounts[DEV_ACCOUNT.provider]!;
    const agent = chain.accounts[DEV_ACCOUNT.agent]!;
    const { walletClient, publicClient } = localClients(chain, funder.privateKey);
    const gas = await walletClient.sendTransaction({
      to: privateKeyToAddress(plan.deployerKey),
      value: parseEther("1"),
    });
    await publicClient.waitForTransactionReceipt({ hash: gas });
    const token = await deployTestToken(chain, plan.deployerKey);
    if (token.address.toLowerCase() !== plan.tokenAddress.toLowerCase()) {
      throw new Error(
        `the dev token was deployed at ${token.address}, not at the planned ${plan.tokenAddress}`,
      );
    }
    const minted = await mintTokens(chain, plan.deployerKey, token, agent.address, DEMO_MINT_MICRO);
    const receipt = await publicClient.waitForTransactionReceipt({ hash: minted });
    if (receipt.status !== "success")
      throw new Error(`minting the demo agent's tokens failed (tx ${minted})`);
    progress(
      `dev USDC contract deployed at ${token.address.toLowerCase()}; ${formatMicro(DEMO_MINT_MICRO)} dev USDC minted to the demo agent`,
    );
    return { chain, token, provider, agent };
  } catch (error) {
    await chain.stop();
    throw error;
  }
}
