import { randomBytes } from "node:crypto";
import { type AddressInfo, createServer, type Socket } from "node:net";
import pg from "pg";
import type { Hex } from "viem";
import { generatePrivateKey, privateKeyToAddress } from "viem/accounts";
import { creditDeposit } from "../../src/billing/ledger.js";
import { createAgentToken } from "../../src/proxy/agent-token.js";
import { runClientSession } from "../../src/proxy/client-session.js";
import {
  createProviderDatabase,
  registerPricedProvider,
  startTestGateway,
  type TestGateway,
} from "./gateway.js";

import { startTestProxy, type TestProxy } from "./test-proxy.js";

export { startTestProxy, type TestProxy };

/**
 * A listener that runs `proxy`'s sessions on loopback sockets whose peer address reads as `peer` (the tests reach
 * loopback only, and some rules depend on the client's address); `onAccept` sees the proxy's side of each.
 */
export async function listenAsSeenFrom(
  proxy: Pick<TestProxy, "ctx">,
  peer: string,
  onAccept: (socket: Socket) => void = () => {},
): Promise<{ port: number; close(): Promise<void> }> {
  const server = createServer((socket) => {
    onAccept(socket);
    Object.defineProperty(socket, "remoteAddress", { value: peer });
    void runClientSession(socket, proxy.ctx);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    port: (server.address() as AddressInfo).port,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

export interface TestAgent {
  key: Hex;
  wallet: string;
  /** A fresh agent token for the provider. */
  token(): Promise<string>;
}

/** A wallet with `amountMicro` credited to its balance with the provider (a ledger deposit entry). */
export async function fundedTestAgent(
  gateway: TestGateway,
  providerId: string,
  amountMicro: bigint,
): Promise<TestAgent> {
  const key = generatePrivateKey();
  const wallet = privateKeyToAddress(key).toLowerCase();
  if (amountMicro > 0n) {
    await creditDeposit(gateway.ctx.db, {
      chainId: 8453,
      txHash: `0x${randomBytes(32).toString("hex")}`,
      agentWallet: wallet,
      providerId,
      amountMicro,
      blockNumber: 1n,
    });
  }
  return { key, wallet, token: () => createAgentToken(key, providerId) };
}

/** A node-postgres session of `agent` through the proxy to `providerId`, connected; `extra` adds client options. */
export async function connectAgent(
  proxy: Pick<TestProxy, "port">,
  agent: TestAgent,
  providerId: string,
  extra: Partial<pg.ClientConfig> = {},
): Promise<pg.Client> {
  const client = new pg.Client({
    host: "127.0.0.1",
    port: proxy.port,
    user: agent.wallet,
    database: providerId,
    password: await agent.token(),
    ...extra,
  });
  await client.connect();
  return client;
}

/** A test gateway and wire proxy over a provider database of `items` rows priced at 1 USDC per 1000 rows. */
export interface ProxiedProvider {
  gateway: TestGateway;
  proxy: TestProxy;
  providerId: string;
  /** The provider database's URL (its owner's). */
  providerUrl: string;
  close(): Promise<void>;
}

/** Starts a {@link ProxiedProvider}: one per test file, in `beforeAll`, closed in `afterAll`. */
export async function startProxiedProvider(items = 300): Promise<ProxiedProvider> {
  const gateway = await startTestGateway();
  const proxy = await startTestProxy(gateway);
  const providerDb = await createProviderDatabase(items);
  const { providerId } = await registerPricedProvider(gateway, providerDb.url, {
    basePricePer1000Rows: 1,
    markupMultiplier: 1,
  });
  return {
    gateway,
    proxy,
    providerId,
    providerUrl: providerDb.url,
    async close() {
      await proxy.close();
      await gateway.close();
      await providerDb.drop();
    },
  };
}
