import { randomBytes } from "node:crypto";
import { type AddressInfo, createServer, type Socket } from "node:net";
import pg from "pg";
import type { Hex } from "viem";
import { generatePrivateKey, privateKeyToAddress } from "viem/accounts";
import { ChargeWriter } from "../../src/billing/charge-writer.js";
import { creditDeposit } from "../../src/billing/ledger.js";
import { WindowClock } from "../../src/billing/window-clock.js";
import { createVerdictCache } from "../../src/guard/verdict-cache.js";
import { providerLookup } from "../../src/providers/checked-connect.js";
import { providerHostsIn } from "../../src/providers/provider-hosts.js";
import { createAgentToken } from "../../src/proxy/agent-token.js";
import { type ProxyContext, runClientSession } from "../../src/proxy/client-session.js";
import { createProxyMetrics } from "../../src/proxy/proxy-metrics.js";
import { type RunningProxy, startProxyServer } from "../../src/proxy/proxy-server.js";
import { SessionRegistry } from "../../src/proxy/session-registry.js";
import { UnauthenticatedConnections } from "../../src/proxy/unauthenticated-connections.js";
import { UpstreamSlots } from "../../src/proxy/upstream-slots.js";
import {
  createProviderDatabase,
  registerPricedProvider,
  startTestGateway,
  type TestGateway,
} from "./gateway.js";

export interface TestProxy extends RunningProxy {
  ctx: ProxyContext;
  url: string;
}

/** The wire proxy in process, sharing the test gateway's metadata database, secret box and metrics registry. */
export async function startTestProxy(
  gateway: Pick<TestGateway, "ctx">,
  overrides: Partial<ProxyContext> = {},
): Promise<TestProxy> {
  const chargeWriter = overrides.chargeWriter ?? new ChargeWriter(gateway.ctx.db, { ttlSeconds: 300 });
  const providerLookupFn = providerLookup(providerHostsIn(gateway.ctx.config));
  const slots = overrides.slots ?? new UpstreamSlots(50, 10_000);
  const ctx: ProxyContext = {
    db: gateway.ctx.db,
    box: gateway.ctx.box,
    slots,
    chargeWriter,
    ...(gateway.ctx.limits ? { limits: gateway.ctx.limits } : {}),
    registry: new SessionRegistry(),
    // A second proxy on one gateway passes the first one's metrics: a registry takes each name once.
    metrics: overrides.metrics ?? createProxyMetrics(gateway.ctx.metrics.registry, slots),
    logger: gateway.ctx.logger,
    check: createVerdictCache(),
    statementTimeoutMs: 10_000,
    allowPrivilegedProviderRoles: gateway.ctx.config.allowPrivilegedProviderRoles,
    ...(providerLookupFn ? { providerLookup: providerLookupFn } : {}),
    reservationTtlSeconds: 300,
    reserveRows: 1000,
    reserveMaxRows: 1_000_000,
    windowClock: new WindowClock(250, chargeWriter),
    windowMaxCostMicro: 1_000_000n,
    startupTimeoutMs: 10_000,
    unauthenticated: new UnauthenticatedConnections({ total: 1000, perAddress: 100 }),
    idleReleaseMs: 30_000,
    releases: new Set(),
    refusals: gateway.ctx.metrics.refusals,
    earnings: gateway.ctx.metrics.earnings,
    ...overrides,
  };
  const proxy = await startProxyServer(ctx, { host: "127.0.0.1", port: 0 });
  return { ...proxy, ctx, url: `postgres://127.0.0.1:${proxy.port}` };
}

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
