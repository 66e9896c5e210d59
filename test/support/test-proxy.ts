import { Registry } from "prom-client";
import { ChargeWriter } from "../../src/billing/charge-writer.js";
import { WindowClock } from "../../src/billing/window-clock.js";
import { createVerdictCache } from "../../src/guard/verdict-cache.js";
import { providerLookup } from "../../src/providers/checked-connect.js";
import { providerHostsIn } from "../../src/providers/provider-hosts.js";
import type { ProxyContext } from "../../src/proxy/client-session.js";
import { createProxyMetrics } from "../../src/proxy/proxy-metrics.js";
import { type RunningProxy, startProxyServer } from "../../src/proxy/proxy-server.js";
import { SessionRegistry } from "../../src/proxy/session-registry.js";
import { UnauthenticatedConnections } from "../../src/proxy/unauthenticated-connections.js";
import { UpstreamSlots } from "../../src/proxy/upstream-slots.js";
import type { GatewayContext } from "../../src/rest/context.js";

export interface TestProxy extends RunningProxy {
  ctx: ProxyContext;
  url: string;
}

/** The wire proxy in process, sharing the test gateway's metadata database, secret box and metrics registry. */
export async function startTestProxy(
  gateway: { ctx: GatewayContext },
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
 * The proxy a test gateway's `/api/query` and `/mcp` run their statements through, as `pgtoll start` builds it
 * from the gateway's settings. Its metrics are in a registry of its own: the gateway's takes those of the wire
 * proxy a test starts itself.
 */
export function startGatewayProxy(
  gateway: { ctx: GatewayContext },
  overrides: Partial<ProxyContext> = {},
): Promise<TestProxy> {
  const { config } = gateway.ctx;
  const slots = new UpstreamSlots(50, 10_000);
  return startTestProxy(gateway, {
    slots,
    metrics: createProxyMetrics(new Registry(), slots),
    check: createVerdictCache(gateway.ctx.policy),
    statementTimeoutMs: config.statementTimeoutMs,
    reservationTtlSeconds: config.reservationTtlSeconds,
    maxRowBytes: config.maxRowBytes,
    ...overrides,
  });
}
