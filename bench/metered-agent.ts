import { randomBytes } from "node:crypto";
import type { Hex } from "viem";
import { generatePrivateKey, privateKeyToAddress } from "viem/accounts";
import { creditDeposit, type Queryable } from "../src/billing/ledger.js";
import { createAgentToken } from "../src/proxy/agent-token.js";

/**
 * What the benchmark charges for `basePricePer1000Rows` (PGTOLL_BENCH_PRICE): a 1.2 markup on it; at the default
 * 0.1 USDC per 1 000 rows, 120 micro-USDC a row.
 */
export function benchPricing(basePricePer1000Rows: number) {
  return { basePricePer1000Rows, markupMultiplier: 1.2 };
}

/** Enough that no benchmark run can exhaust it: 10 million USDC. */
export const AMPLE_BALANCE_MICRO = 10_000_000n * 1_000_000n;

export interface RegisteredProvider {
  providerId: string;
  apiKey: string;
}

async function postJson(
  url: string,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<{ status: number; json: unknown }> {
  const response = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify(body),
  });
  return { status: response.status, json: await response.json().catch(() => null) };
}

/** Registers the benchmark database as a provider through the REST API and sets its pricing. */
export async function registerProvider(
  httpUrl: string,
  connectionString: string,
  pricing: ReturnType<typeof benchPricing>,
): Promise<RegisteredProvider> {
  const registered = await postJson(`${httpUrl}/api/providers/register`, {
    name: "pgbench data",
    email: `bench-${randomBytes(4).toString("hex")}@example.com`,
    walletAddress: `0x${randomBytes(20).toString("hex")}`,
    connectionString,
  });
  if (registered.status !== 201)
    throw new Error(
      `provider registration failed (${registered.status}): ${JSON.stringify(registered.json)}`,
    );
  const { provider, apiKey } = registered.json as { provider: { id: string }; apiKey: string };
  const priced = await postJson(`${httpUrl}/api/providers/${provider.id}/pricing`, pricing, {
    "x-api-key": apiKey,
  });
  if (priced.status !== 200)
    throw new Error(`setting the pricing failed (${priced.status}): ${JSON.stringify(priced.json)}`);
  return { providerId: provider.id, apiKey };
}

export interface BenchAgent {
  wallet: string;
  key: Hex;
  providerId: string;
  /** A fresh agent token (the proxy password), valid for an hour. */
  token(): Promise<string>;
}

/**
 * A new agent wallet funded with `amountMicro` by a deposit entry written straight to the ledger (there is no
 * chain in the benchmark; the deposit path is not what is measured).
 */
export async function fundedAgent(
  ledger: Queryable,
  providerId: string,
  amountMicro = AMPLE_BALANCE_MICRO,
): Promise<BenchAgent> {
  const key = generatePrivateKey();
  const wallet = privateKeyToAddress(key).toLowerCase();
  await fundAgent(ledger, wallet, providerId, amountMicro);
  return { wallet, key, providerId, token: () => createAgentToken(key, providerId) };
}

/**
 * Credits an agent wallet's balance with one more provider the same way: a balance is per agent and provider, so
 * an agent that reads through a second priced provider needs funds there too.
 */
export async function fundAgent(
  ledger: Queryable,
  wallet: string,
  providerId: string,
  amountMicro = AMPLE_BALANCE_MICRO,
): Promise<void> {
  await creditDeposit(ledger, {
    chainId: 8453,
    txHash: `0x${randomBytes(32).toString("hex")}`,
    agentWallet: wallet,
    providerId,
    amountMicro,
    blockNumber: 1n,
  });
}
