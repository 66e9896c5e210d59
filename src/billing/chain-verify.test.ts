import { createServer as createHttpServer, type Server } from "node:http";
import { createServer as createTcpServer } from "node:net";
import { type Address, type Hex, keccak256, toHex } from "viem";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  deployTestToken,
  type LocalChain,
  localClients,
  mintTokens,
  startLocalChain,
  type TestToken,
  transferTokens,
  transferTokensBatch,
} from "../devchain/index.js";
import { type ChainSettings, ChainUnavailableError, createChainVerifier } from "./chain-verify.js";

let chain: LocalChain;
let token: TestToken;
let otherToken: TestToken;
let agent: { address: Address; privateKey: Hex };
let provider: { address: Address; privateKey: Hex };
let stranger: { address: Address; privateKey: Hex };

function verifier(overrides: Partial<ChainSettings> = {}) {
  return createChainVerifier({
    rpcUrl: chain.rpcUrl,
    chainId: 8453,
    tokenAddress: token.address,
    minConfirmations: 1,
    ...overrides,
  });
}

beforeAll(async () => {
  chain = await startLocalChain();
  const [deployer, a, p, s] = chain.accounts;
  agent = a!;
  provider = p!;
  stranger = s!;
  token = await deployTestToken(chain, deployer!.privateKey);
  otherToken = await deployTestToken(chain, deployer!.privateKey);
  for (const [t, holder] of [
    [token, agent],
    [token, stranger],
    [otherToken, agent],
  ] as const) {
    await mintTokens(chain, deployer!.privateKey, t, holder.address, 1_000_000_000n);
  }
});

afterAll(async () => {
  await chain?.stop();
});

describe("verifyDeposit on a local chain", () => {
  it("credits a transfer from the agent to the provider with its exact amount", async () => {
    const hash = await transferTokens(chain, agent.privateKey, token, provider.address, 12_345_678n);
    const { publicClient } = localClients(chain, agent.privateKey);
    const receipt = await publicClient.getTransactionReceipt({ hash });

    const result = await verifier().verifyDeposit(hash, agent.address.toLowerCase(), provider.address);
    expect(result).toEqual({
      ok: true,
      amountMicro: 12_345_678n,
      blockNumber: receipt.blockNumber,
      confirmations: 1n,
      from: agent.address,
      to: provider.address,
    });
  });

  it("sums every matching Transfer log of one transaction and ignores the others", async () => {
    const hash = await transferTokensBatch(chain, agent.privateKey, token, [
      { to: provider.address, amount: 1_500_000n },
      { to: stranger.address, amount: 7_000_000n },
      { to: provider.address, amount: 250_001n },
    ]);
    const result = await verifier().verifyDeposit(hash, agent.address, provider.address);
    expect(result).toMatchObject({ ok: true, amountMicro: 1_750_001n });
  });

  it("refuses a transfer of another token contract", async () => {
    const hash = await transferTokens(chain, agent.privateKey, otherToken, provider.address, 5_000_000n);
    const result = await verifier().verifyDeposit(hash, agent.address, provider.address);
    expect(result).toMatchObject({ ok: false, reason: "no_matching_transfer" });
    expect(!result.ok && result.message).toContain("accepted token contract");
  });

  it("refuses a transfer to another recipient", async () => {
    const hash = await transferTokens(chain, agent.privateKey, token, stranger.address, 5_000_000n);
    const result = await verifier().verifyDeposit(hash, agent.address, provider.address);
    expect(result).toMatchObject({ ok: false, reason: "no_matching_transfer" });
    expect(!result.ok && result.message).toContain("not to the provider wallet");
  });

  it("refuses a transfer sent by someone other than the agent", async () => {
    const hash = await transferTokens(chain, stranger.privateKey, token, provider.address, 5_000_000n);
    const result = await verifier().verifyDeposit(hash, agent.address, provider.address);
    expect(result).toMatchObject({ ok: false, reason: "no_matching_transfer" });
    expect(!result.ok && result.message).toContain("no token transfer from the agent wallet");
  });

  it("refuses a transaction without any token transfer", async () => {
    const { walletClient } = localClients(chain, agent.privateKey);
    const hash = await walletClient.sendTransaction({ to: provider.address, value: 1_000n });
    const result = await verifier().verifyDeposit(hash, agent.address, provider.address);
    expect(result).toMatchObject({ ok: false, reason: "no_matching_transfer" });
    expect(!result.ok && result.message).toContain("no token Transfer event");
  });

  it("refuses a reverted transaction", async () => {
    const hash = await transferTokens(chain, agent.privateKey, token, provider.address, 10n ** 15n, {
      gas: 100_000n,
    });
    const { publicClient } = localClients(chain, agent.privateKey);
    expect((await publicClient.getTransactionReceipt({ hash })).status).toBe("reverted");

    const result = await verifier().verifyDeposit(hash, agent.address, provider.address);
    expect(result).toMatchObject({ ok: false, reason: "reverted" });
  });

  it("reports an unknown hash as not found", async () => {
    const unknown = keccak256(toHex(`no such transaction ${Date.now()}`));
    const result = await verifier().verifyDeposit(unknown, agent.address, provider.address);
    expect(result).toMatchObject({ ok: false, reason: "not_found" });
  });

  it("waits for enough confirmations", async () => {
    const hash = await transferTokens(chain, agent.privateKey, token, provider.address, 3_000_000n);
    const needsThree = verifier({ minConfirmations: 3 });

    const early = await needsThree.verifyDeposit(hash, agent.address, provider.address);
    expect(early).toMatchObject({ ok: false, reason: "insufficient_confirmations" });
    expect(!early.ok && early.message).toContain("1 of 3");

    await chain.mine(2);
    const later = await needsThree.verifyDeposit(hash, agent.address, provider.address);
    expect(later).toMatchObject({ ok: true, amountMicro: 3_000_000n, confirmations: 3n });
  });

  it("treats a pending transaction as unconfirmed, not unknown", async () => {
    await chain.setAutomine(false);
    try {
      const hash = await transferTokens(chain, agent.privateKey, token, provider.address, 1_000_000n);
      const pending = await verifier().verifyDeposit(hash, agent.address, provider.address);
      expect(pending).toMatchObject({ ok: false, reason: "insufficient_confirmations" });
      expect(!pending.ok && pending.message).toContain("not mined yet");

      await chain.mine(1);
      expect(await verifier().verifyDeposit(hash, agent.address, provider.address)).toMatchObject({
        ok: true,
      });
    } finally {
      await chain.setAutomine(true);
    }
  });

  it("refuses when the RPC serves another chain", async () => {
    const hash = await transferTokens(chain, agent.privateKey, token, provider.address, 1_000_000n);
    const result = await verifier({ chainId: 1 }).verifyDeposit(hash, agent.address, provider.address);
    expect(result).toMatchObject({ ok: false, reason: "wrong_chain" });
    expect(!result.ok && result.message).toContain("8453");
  });

  it("rejects a malformed hash or wallet before asking the chain", async () => {
    const v = verifier();
    await expect(v.verifyDeposit("0x1234", agent.address, provider.address)).rejects.toThrow(TypeError);
    const hash = keccak256(toHex("x"));
    await expect(v.verifyDeposit(hash, "agent", provider.address)).rejects.toThrow(TypeError);
  });
});

describe("verifyDeposit without a usable RPC", () => {
  const hash = keccak256(toHex("any"));
  const wallet = "0x70997970c51812dc3a010c7d01b50e0d17dc79c8";
  const servers: Server[] = [];

  afterAll(async () => {
    for (const server of servers) {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    }
  });

  async function listen(handler: Parameters<typeof createHttpServer>[1]): Promise<string> {
    const server = createHttpServer(handler);
    servers.push(server);
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    const address = server.address();
    if (typeof address !== "object" || !address) throw new Error("no address");
    return `http://127.0.0.1:${address.port}`;
  }

  async function closedPort(): Promise<number> {
    const server = createTcpServer();
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    const address = server.address();
    await new Promise((r) => server.close(r));
    if (typeof address !== "object" || !address) throw new Error("no address");
    return address.port;
  }

  async function expectUnavailable(settings: Partial<ChainSettings> & { rpcUrl: string }, withinMs: number) {
    const v = createChainVerifier({
      chainId: 8453,
      tokenAddress: "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913",
      minConfirmations: 1,
      ...settings,
    });
    const started = Date.now();
    const error = await v.verifyDeposit(hash, wallet, wallet).catch((e: unknown) => e);
    expect(Date.now() - started).toBeLessThan(withinMs);
    expect(error).toBeInstanceOf(ChainUnavailableError);
    expect((error as Error).message).toContain("could not be reached");
    return error as ChainUnavailableError;
  }

  it("throws ChainUnavailableError quickly when the port is closed", async () => {
    const port = await closedPort();
    const error = await expectUnavailable({ rpcUrl: `http://127.0.0.1:${port}/secret-key` }, 3_000);
    expect(error.message).not.toContain("secret-key");
  });

  it("throws ChainUnavailableError when the RPC does not answer in time", async () => {
    const rpcUrl = await listen(() => {});
    await expectUnavailable({ rpcUrl, rpcTimeoutMs: 300, rpcRetryCount: 0 }, 3_000);
  });

  it("throws ChainUnavailableError on HTTP 5xx", async () => {
    let requests = 0;
    const rpcUrl = await listen((_req, res) => {
      requests++;
      res.writeHead(503).end("upstream down");
    });
    await expectUnavailable({ rpcUrl, rpcRetryCount: 2 }, 5_000);
    expect(requests).toBe(3);
  });
});
