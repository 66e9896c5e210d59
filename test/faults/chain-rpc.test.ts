import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { Hex } from "viem";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createChainVerifier } from "../../src/billing/chain-verify.js";
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

/** What the RPC in front of the chain does to each request. */
type RpcMode = "up" | "down" | "slow" | "wrong-chain" | "other-token";

let chain: LocalChain;
let token: TestToken;
let rpc: Server;
let mode: RpcMode = "up";
let gateway: TestGateway;
let providerDb: TestDatabase;
let agentKey: Hex;
let agent: string;
const OTHER_TOKEN = "0x000000000000000000000000000000000000dead";

/**
 * A loopback JSON-RPC proxy in front of the local chain that can be down (connections reset), slow (longer
 * than the verifier's timeout) or lie (another chain id; receipts whose Transfer logs come from another token).
 */
async function startFaultyRpc(target: string): Promise<Server> {
  const server = createServer((req, res) => {
    let body = "";
    req.on("data", (chunk) => (body += chunk));
    req.on("end", async () => {
      if (mode === "down") {
        req.socket.destroy();
        return;
      }
      if (mode === "slow") await new Promise((resolve) => setTimeout(resolve, 3000));
      const call = JSON.parse(body) as { id: number; method: string };
      if (mode === "wrong-chain" && call.method === "eth_chainId") {
        res
          .setHeader("content-type", "application/json")
          .end(JSON.stringify({ jsonrpc: "2.0", id: call.id, result: "0x1" }));
        return;
      }
      const upstream = await fetch(target, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body,
      });
      const answer = (await upstream.json()) as { result?: { logs?: { address: string }[] } | null };
      if (mode === "other-token" && call.method === "eth_getTransactionReceipt" && answer.result?.logs)
        for (const log of answer.result.logs) log.address = OTHER_TOKEN;
      if (!res.destroyed) res.setHeader("content-type", "application/json").end(JSON.stringify(answer));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return server;
}

beforeAll(async () => {
  chain = await startLocalChain();
  const [deployer, agentAccount] = chain.accounts;
  agentKey = agentAccount!.privateKey;
  agent = agentAccount!.address;
  token = await deployTestToken(chain, deployer!.privateKey);
  await mintTokens(chain, deployer!.privateKey, token, agent as Hex, 1_000_000_000n);
  rpc = await startFaultyRpc(chain.rpcUrl);
  gateway = await startTestGateway({
    verifier: createChainVerifier({
      rpcUrl: `http://127.0.0.1:${(rpc.address() as AddressInfo).port}`,
      chainId: 8453,
      tokenAddress: token.address,
      minConfirmations: 1,
      rpcTimeoutMs: 1000,
    }),
  });
  providerDb = await createProviderDatabase(5);
}, 120_000);
afterAll(async () => {
  await gateway?.close();
  await providerDb?.drop();
  rpc?.closeAllConnections();
  await new Promise((resolve) => rpc?.close(resolve));
  await chain?.stop();
});

describe("deposits while the chain RPC is down, slow or lying", () => {
  // The lying chain id first: once the RPC has served the right one, the verifier trusts it for a minute.
  it.each([
    ["wrong-chain", 402, /deposit not accepted \(wrong_chain\): the chain RPC serves chain id 1/],
    ["down", 500, /blockchain verification failed: chain RPC .* could not be reached/],
    ["slow", 500, /blockchain verification failed: chain RPC .* could not be reached/],
    ["other-token", 402, /deposit not accepted \(no_matching_transfer\)/],
  ] as const)(
    "RPC %s: answers %i, credits nothing, and credits the deposit once the RPC is back",
    async (fault, status, message) => {
      const provider = await registerPricedProvider(gateway, providerDb.url);
      const txHash = await transferTokens(chain, agentKey, token, provider.walletAddress as Hex, 2_500_000n);
      const deposit = () =>
        gateway.app.inject({
          method: "POST",
          url: "/api/deposit",
          payload: { txHash, agentWallet: agent, providerId: provider.providerId },
        });
      const balance = async () =>
        (
          await gateway.app.inject({ method: "GET", url: `/api/balance/${agent}/${provider.providerId}` })
        ).json().balance;

      mode = fault;
      const started = Date.now();
      const refused = await deposit();
      const tookMs = Date.now() - started;
      expect(refused.statusCode).toBe(status);
      expect(refused.json().error).toMatch(message);
      expect(await balance()).toBe("0");
      // A slow RPC is given up on after the verifier's timeout, not waited for.
      expect(tookMs).toBeLessThan(2900);

      mode = "up";
      const credited = await deposit();
      expect(credited.statusCode, credited.body).toBe(200);
      expect(await balance()).toBe("2.500000");
    },
    30_000,
  );
});
