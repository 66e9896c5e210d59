import { randomBytes } from "node:crypto";
import type { FastifyInstance } from "fastify";
import pg from "pg";
import { pino } from "pino";
import type { DepositVerifier } from "../../src/billing/chain-verify.js";
import { DailyLimitWatch } from "../../src/billing/daily-limit-watch.js";
import { loadConfig } from "../../src/config.js";
import { loadGuard } from "../../src/guard/index.js";
import { providerLookup } from "../../src/providers/checked-connect.js";
import { type ProviderHostPolicy, providerHostsIn } from "../../src/providers/provider-hosts.js";
import { createSecretBox } from "../../src/providers/secret-box.js";
import { UpstreamPools } from "../../src/providers/upstream-pools.js";
import type { ProxyAccess } from "../../src/proxy/proxy-access.js";
import type { ProxyContext } from "../../src/proxy/proxy-context.js";
import { buildApp } from "../../src/rest/app.js";
import type { GatewayContext } from "../../src/rest/context.js";
import { createMetrics } from "../../src/rest/plugins/metrics.js";
import { createMemoryStore } from "../../src/rest/plugins/rate-limit-store.js";
import { x402Gateway } from "../../src/x402/gateway.js";
import { createMetadataDatabase, createOwnedTestDatabase, type OwnedTestDatabase } from "./database.js";
import { startGatewayProxy, type TestProxy } from "./test-proxy.js";

/**
 * A provider database with the fixture tables the guard cases name (`items`, `orders`), owned by a
 * least-privilege role: `url` is that role's, as a provider registers it; `adminUrl` the superuser's.
 */
export async function createProviderDatabase(itemCount = 50): Promise<OwnedTestDatabase> {
  const db = await createOwnedTestDatabase("provider");
  const client = new pg.Client({ connectionString: db.url });
  await client.connect();
  try {
    await client.query(`
      CREATE TABLE items (id serial PRIMARY KEY, name text NOT NULL, created_at timestamptz NOT NULL DEFAULT now());
      CREATE TABLE orders (id serial PRIMARY KEY, item_id int NOT NULL, name text NOT NULL DEFAULT 'o');
      INSERT INTO items (name) SELECT 'item ' || g FROM generate_series(1, ${itemCount}) g;
      INSERT INTO orders (item_id) SELECT id FROM items WHERE id % 2 = 0;
    `);
  } finally {
    await client.end();
  }
  return db;
}

export interface TestGateway {
  app: FastifyInstance;
  ctx: GatewayContext;
  /** The proxy `/api/query` and `/mcp` run statements through (not the one a wire test starts for itself). */
  proxy: TestProxy;
  metaUrl: string;
  close(): Promise<void>;
}

const unusedVerifier: DepositVerifier = {
  verifyDeposit() {
    throw new Error("this test gateway has no chain: pass a verifier");
  },
};

/** The REST app in process, over a fresh migrated metadata database, with the given overrides. */
export async function startTestGateway(
  overrides: {
    verifier?: DepositVerifier;
    env?: Record<string, string>;
    chainId?: number;
    logger?: GatewayContext["logger"];
    /** Where provider databases may be, in place of PGTOLL_PROVIDER_HOSTS (a policy with its own resolver). */
    providerHosts?: ProviderHostPolicy;
    /** Replaces these settings of the proxy `/api/query` and `/mcp` run on. */
    proxy?: Pick<ProxyContext, "restIdleReleaseMs">;
  } = {},
): Promise<TestGateway> {
  await loadGuard();
  const meta = await createMetadataDatabase();
  // Test provider databases are on the test cluster, on loopback: where `pgtoll start` would not allow them.
  const config = loadConfig({ PGTOLL_RATE_LIMIT: "off", PGTOLL_PROVIDER_HOSTS: "any", ...overrides.env });
  if (overrides.chainId) config.chainId = overrides.chainId;
  if (overrides.providerHosts) config.providerHosts = overrides.providerHosts;
  const lookup = providerLookup(providerHostsIn(config));
  const box = createSecretBox(randomBytes(32));
  const upstream = new UpstreamPools({
    box,
    size: config.providerPoolSize,
    statementTimeoutMs: config.statementTimeoutMs,
    refuseSuperuser: !config.allowPrivilegedProviderRoles,
    maxMessageBytes: config.maxRowBytes,
    maxResultsInMemory: config.maxResultsInMemory,
    ...(lookup ? { lookup } : {}),
  });
  const rateLimitStore = createMemoryStore();
  const verifier = overrides.verifier ?? unusedVerifier;
  const x402 = x402Gateway(config, meta.pool, verifier);
  const limits = new DailyLimitWatch({ connectionString: meta.db.url });
  await limits.start();
  const proxyAccess: ProxyAccess = {};
  const ctx: GatewayContext = {
    config,
    proxy: proxyAccess,
    db: meta.pool,
    box,
    upstream,
    verifier,
    limits,
    ...(x402 ? { x402 } : {}),
    rateLimitStore,
    metrics: createMetrics(),
    logger: overrides.logger ?? pino({ level: process.env.TEST_LOG_LEVEL ?? "silent" }),
  };
  const app = await buildApp(ctx);
  await app.ready();
  const proxy = await startGatewayProxy({ ctx }, overrides.proxy);
  proxyAccess.connect = (agent) => proxy.connectInProcess(agent);
  proxyAccess.reclaimIdleHolds = (wallet, providerId) => proxy.reclaimIdleHolds(wallet, providerId);
  return {
    app,
    ctx,
    proxy,
    metaUrl: meta.db.url,
    async close() {
      await app.close();
      await proxy.close();
      await limits.close();
      await upstream.closeAll();
      await rateLimitStore.close();
      await meta.close();
    },
  };
}

/** POST /api/providers/register with a fresh email and wallet (unless given): the answer, whatever it is. */
export function postProviderRegistration(
  gateway: Pick<TestGateway, "app">,
  connectionString: string,
  walletAddress = `0x${randomBytes(20).toString("hex")}`,
) {
  return gateway.app.inject({
    method: "POST",
    url: "/api/providers/register",
    payload: {
      name: "Test data",
      email: `${randomBytes(6).toString("hex")}@example.com`,
      walletAddress,
      connectionString,
    },
  });
}

/** Registers a provider through the API and sets its pricing; returns its id, key and wallet. */
export async function registerPricedProvider(
  gateway: TestGateway,
  connectionString: string,
  pricing: { basePricePer1000Rows: number; markupMultiplier: number } & Record<string, unknown> = {
    basePricePer1000Rows: 1,
    markupMultiplier: 1,
  },
  walletAddress = `0x${randomBytes(20).toString("hex")}`,
): Promise<{ providerId: string; apiKey: string; walletAddress: string }> {
  const registered = await postProviderRegistration(gateway, connectionString, walletAddress);
  if (registered.statusCode !== 201) throw new Error(`register failed: ${registered.body}`);
  const { provider, apiKey } = registered.json();
  const priced = await gateway.app.inject({
    method: "POST",
    url: `/api/providers/${provider.id}/pricing`,
    headers: { "x-api-key": apiKey },
    payload: pricing,
  });
  if (priced.statusCode !== 200) throw new Error(`pricing failed: ${priced.body}`);
  return { providerId: provider.id, apiKey, walletAddress };
}
