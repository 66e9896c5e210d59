import { randomBytes } from "node:crypto";
import type { Hex } from "viem";
import { privateKeyToAddress } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createChainVerifier } from "../../src/billing/chain-verify.js";
import { creditDeposit } from "../../src/billing/ledger.js";
import {
  deployTestToken,
  type LocalChain,
  mintTokens,
  startLocalChain,
  type TestToken,
  transferTokens,
} from "../../src/devchain/index.js";
import type { TestDatabase } from "../support/database.js";
import {
  createProviderDatabase,
  registerPricedProvider,
  startTestGateway,
  type TestGateway,
} from "../support/gateway.js";

let chain: LocalChain;
let token: TestToken;
let otherToken: TestToken;
let gateway: TestGateway;
let providerDb: TestDatabase;
let provider: { providerId: string; walletAddress: string };
let agentKey: Hex;
let agent: string;
let strangerKey: Hex;

beforeAll(async () => {
  chain = await startLocalChain();
  const [deployer, agentAccount, stranger] = chain.accounts;
  agentKey = agentAccount!.privateKey;
  agent = agentAccount!.address;
  strangerKey = stranger!.privateKey;
  token = await deployTestToken(chain, deployer!.privateKey);
  otherToken = await deployTestToken(chain, deployer!.privateKey);
  for (const t of [token, otherToken]) {
    await mintTokens(chain, deployer!.privateKey, t, agent as Hex, 1_000_000_000n);
    await mintTokens(chain, deployer!.privateKey, t, stranger!.address, 1_000_000_000n);
  }
  gateway = await startTestGateway({
    verifier: createChainVerifier({
      rpcUrl: chain.rpcUrl,
      chainId: 8453,
      tokenAddress: token.address,
      minConfirmations: 1,
    }),
  });
  providerDb = await createProviderDatabase(5);
  provider = await registerPricedProvider(gateway, providerDb.url);
});
afterAll(async () => {
  await gateway?.close();
  await providerDb?.drop();
  await chain?.stop();
});

function deposit(body: Record<string, unknown>, app = gateway.app) {
  return app.inject({ method: "POST", url: "/api/deposit", payload: body });
}

async function balanceOf(wallet: string) {
  return (
    await gateway.app.inject({ method: "GET", url: `/api/balance/${wallet}/${provider.providerId}` })
  ).json();
}

describe("POST /api/deposit", () => {
  it("credits a real transfer with its exact amount, once", async () => {
    expect(await balanceOf(agent)).toEqual({
      agentWallet: agent,
      providerId: provider.providerId,
      balance: "0",
      available: "0",
      updatedAt: null,
    });
    const txHash = await transferTokens(chain, agentKey, token, provider.walletAddress as Hex, 12_345_678n);
    const res = await deposit({ txHash, agentWallet: agent, providerId: provider.providerId });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({
      success: true,
      balance: "12.345678",
      transaction: { txHash, amount: "12.345678", verified: true },
    });
    const balance = await balanceOf(agent.toLowerCase());
    expect(balance).toMatchObject({ agentWallet: agent, balance: "12.345678", available: "12.345678" });
    expect(new Date(balance.updatedAt).getTime()).toBeGreaterThan(Date.now() - 60_000);

    const replay = await deposit({ txHash, agentWallet: agent, providerId: provider.providerId });
    expect(replay.statusCode).toBe(409);
    expect(replay.json().error).toMatch(/already processed/);

    const history = (
      await gateway.app.inject({
        method: "GET",
        url: `/api/transactions/${agent}?providerId=${provider.providerId}`,
      })
    ).json();
    expect(history.agentWallet).toBe(agent);
    expect(history.transactions[0]).toMatchObject({
      type: "deposit",
      amount: "12.345678",
      balanceBefore: "0.000000",
      balanceAfter: "12.345678",
      txHash,
      providerId: provider.providerId,
    });
    expect(Object.keys(history.transactions[0]).sort()).toEqual(
      [
        "amount",
        "balanceAfter",
        "balanceBefore",
        "id",
        "metadata",
        "providerId",
        "timestamp",
        "txHash",
        "type",
      ].sort(),
    );
  });

  it.each([
    [
      "wrong token contract",
      async () => transferTokens(chain, agentKey, otherToken, provider.walletAddress as Hex, 5_000_000n),
      /token contract/,
    ],
    [
      "wrong recipient",
      async () =>
        transferTokens(
          chain,
          agentKey,
          token,
          privateKeyToAddress(`0x${randomBytes(32).toString("hex")}`),
          5_000_000n,
        ),
      /provider wallet/,
    ],
    [
      "another sender",
      async () => transferTokens(chain, strangerKey, token, provider.walletAddress as Hex, 5_000_000n),
      /from the agent wallet/,
    ],
    [
      "a reverted transaction",
      async () =>
        transferTokens(chain, agentKey, token, provider.walletAddress as Hex, 10n ** 18n, { gas: 100_000n }),
      /revert/,
    ],
    ["an unknown hash", async () => `0x${randomBytes(32).toString("hex")}` as Hex, /not found/],
  ])("answers 402 for %s and credits nothing", async (_name, makeTx, message) => {
    const before = await balanceOf(agent);
    const txHash = await makeTx();
    const res = await deposit({ txHash, agentWallet: agent, providerId: provider.providerId });
    expect(res.statusCode).toBe(402);
    expect(res.json().error).toMatch(message);
    expect(await balanceOf(agent)).toEqual(before);
  });

  it("answers 402 until the transfer has enough confirmations, then credits it", async () => {
    const strict = await startTestGateway({
      verifier: createChainVerifier({
        rpcUrl: chain.rpcUrl,
        chainId: 8453,
        tokenAddress: token.address,
        minConfirmations: 3,
      }),
    });
    try {
      const p = await registerPricedProvider(strict, providerDb.url);
      const txHash = await transferTokens(chain, agentKey, token, p.walletAddress as Hex, 2_000_000n);
      const early = await deposit({ txHash, agentWallet: agent, providerId: p.providerId }, strict.app);
      expect(early.statusCode).toBe(402);
      expect(early.json().error).toMatch(/confirmations/);
      await chain.mine(2);
      const later = await deposit({ txHash, agentWallet: agent, providerId: p.providerId }, strict.app);
      expect(later.statusCode).toBe(200);
      expect(later.json().balance).toBe("2.000000");
    } finally {
      await strict.close();
    }
  });

  it("answers 400 for malformed input", async () => {
    const valid = { txHash: `0x${"a".repeat(64)}`, agentWallet: agent, providerId: provider.providerId };
    for (const [field, value] of [
      ["txHash", "0x1234"],
      ["txHash", "a".repeat(66)],
      ["agentWallet", "0xnope"],
      ["providerId", "not-a-uuid"],
      ["txHash", 5],
    ] as const) {
      const res = await deposit({ ...valid, [field]: value });
      expect(res.statusCode, `${field}=${value}`).toBe(400);
      expect(res.json().error).toMatch(new RegExp(field));
    }
  });

  it("answers 404 for an unknown provider", async () => {
    const res = await deposit({
      txHash: `0x${"b".repeat(64)}`,
      agentWallet: agent,
      providerId: "00000000-0000-4000-8000-000000000000",
    });
    expect(res.statusCode).toBe(404);
  });

  it("answers 500 when the chain RPC is unreachable, and credits nothing", async () => {
    const offline = await startTestGateway({
      verifier: createChainVerifier({
        rpcUrl: "http://127.0.0.1:9",
        chainId: 8453,
        tokenAddress: token.address,
        minConfirmations: 1,
        rpcTimeoutMs: 1000,
      }),
    });
    try {
      const p = await registerPricedProvider(offline, providerDb.url);
      const txHash = await transferTokens(chain, agentKey, token, p.walletAddress as Hex, 1_000_000n);
      const res = await deposit({ txHash, agentWallet: agent, providerId: p.providerId }, offline.app);
      expect(res.statusCode).toBe(500);
      expect(res.json().error).toMatch(/blockchain verification failed.*could not be reached/);
      const balance = (
        await offline.app.inject({ method: "GET", url: `/api/balance/${agent}/${p.providerId}` })
      ).json();
      expect(balance.balance).toBe("0");
    } finally {
      await offline.close();
    }
  });

  it("50 concurrent deposits of one transaction credit it exactly once: one 200, the rest 409", async () => {
    const p = await registerPricedProvider(gateway, providerDb.url);
    const txHash = await transferTokens(chain, agentKey, token, p.walletAddress as Hex, 3_000_000n);
    const results = await Promise.all(
      Array.from({ length: 50 }, () => deposit({ txHash, agentWallet: agent, providerId: p.providerId })),
    );
    const statuses = results.map((r) => r.statusCode).sort();
    expect(statuses.filter((s) => s === 200)).toHaveLength(1);
    expect(statuses.filter((s) => s === 409)).toHaveLength(49);
    const balance = (
      await gateway.app.inject({ method: "GET", url: `/api/balance/${agent}/${p.providerId}` })
    ).json();
    expect(balance.balance).toBe("3.000000");
  });
});

describe("GET /api/balance and /api/transactions", () => {
  it("validate their parameters", async () => {
    expect(
      (await gateway.app.inject({ method: "GET", url: `/api/balance/0x12/${provider.providerId}` }))
        .statusCode,
    ).toBe(400);
    expect((await gateway.app.inject({ method: "GET", url: `/api/balance/${agent}/nope` })).statusCode).toBe(
      400,
    );
    expect(
      (
        await gateway.app.inject({
          method: "GET",
          url: `/api/balance/${agent}/00000000-0000-4000-8000-000000000000`,
        })
      ).statusCode,
    ).toBe(404);
    expect((await gateway.app.inject({ method: "GET", url: "/api/transactions/0xzz" })).statusCode).toBe(400);
    expect(
      (await gateway.app.inject({ method: "GET", url: `/api/transactions/${agent}?limit=0` })).statusCode,
    ).toBe(400);
    expect(
      (await gateway.app.inject({ method: "GET", url: `/api/transactions/${agent}?limit=abc` })).statusCode,
    ).toBe(400);
    expect(
      (await gateway.app.inject({ method: "GET", url: `/api/transactions/${agent}?providerId=x` }))
        .statusCode,
    ).toBe(400);
  });

  it("limit defaults to 50 and is capped at 100, newest first", async () => {
    const wallet = `0x${randomBytes(20).toString("hex")}`;
    for (let i = 1; i <= 120; i++) {
      await creditDeposit(gateway.ctx.db, {
        chainId: 8453,
        txHash: `0x${randomBytes(32).toString("hex")}`,
        agentWallet: wallet,
        providerId: provider.providerId,
        amountMicro: BigInt(i),
        blockNumber: BigInt(i),
      });
    }
    const list = async (query: string) => {
      const res = await gateway.app.inject({ method: "GET", url: `/api/transactions/${wallet}${query}` });
      expect(res.statusCode, res.body).toBe(200);
      return res.json().transactions as { amount: string }[];
    };
    const byDefault = await list("");
    expect(byDefault).toHaveLength(50);
    expect(byDefault[0]!.amount).toBe("0.000120");
    expect(await list("?limit=500")).toHaveLength(100);
    expect(await list("?limit=3")).toHaveLength(3);
  });
});
