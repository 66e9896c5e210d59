import { randomBytes } from "node:crypto";
import pg from "pg";
import type { Hex } from "viem";
import { generatePrivateKey, privateKeyToAddress } from "viem/accounts";
import { ChargeWriter } from "../../src/billing/charge-writer.js";
import { creditDeposit } from "../../src/billing/ledger.js";
import { providerLookup } from "../../src/providers/checked-connect.js";
import { providerHostsIn } from "../../src/providers/provider-hosts.js";
import { createAgentToken } from "../../src/proxy/agent-token.js";
import type { ProxyContext } from "../../src/proxy/client-session.js";
import { createProxyMetrics } from "../../src/proxy/proxy-metrics.js";
import { type RunningProxy, startProxyServer } from "../../src/proxy/proxy-server.js";
import { SessionRegistry } from "../../src/proxy/session-registry.js";
import { SettlementClock } from "../../src/proxy/settlement-clock.js";
import { UpstreamSlots } from "../../src/proxy/upstream-slots.js";
import { createVerdictCache } from "../../src/proxy/verdict-cache.js";
import type { TestGateway } from "./gateway.js";

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
  const ctx: ProxyContext = {
    db: gateway.ctx.db,
    box: gateway.ctx.box,
    slots: new UpstreamSlots(50, 10_000),
    chargeWriter,
    registry: new SessionRegistry(),
    // A second proxy on one gateway passes the first one's metrics: a registry takes each name once.
    metrics: overrides.metrics ?? createProxyMetrics(gateway.ctx.metrics.registry),
    logger: gateway.ctx.logger,
    check: createVerdictCache(),
    statementTimeoutMs: 10_000,
    allowPrivilegedProviderRoles: gateway.ctx.config.allowPrivilegedProviderRoles,
    ...(providerLookupFn ? { providerLookup: providerLookupFn } : {}),
    reservationTtlSeconds: 300,
    reserveRows: 1000,
    reserveMaxRows: 1_000_000,
    settlementClock: new SettlementClock(250, chargeWriter),
    settleMaxMicro: 1_000_000n,
    startupTimeoutMs: 10_000,
    idleReleaseMs: 30_000,
    releases: new Set(),
    ...overrides,
  };
  const proxy = await startProxyServer(ctx, { host: "127.0.0.1", port: 0 });
  return { ...proxy, ctx, url: `postgres://127.0.0.1:${proxy.port}` };
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
