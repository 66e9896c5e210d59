import { readFileSync } from "node:fs";
import { createSecureContext } from "node:tls";
import { Redis } from "ioredis";
import pg from "pg";
import { startRefusalFlusher } from "./analytics/refusal-flusher.js";
import { createChainVerifier } from "./billing/chain-verify.js";
import { ChargeWriter } from "./billing/charge-writer.js";
import { DailyLimitWatch } from "./billing/daily-limit-watch.js";
import { releaseExpiredReservations } from "./billing/ledger.js";
import { WindowClock } from "./billing/window-clock.js";
import type { Config } from "./config.js";
import { connectProjectCluster } from "./control/cluster.js";
import { controlSettingsFrom, maintenanceUrl } from "./control/settings.js";
import { lockDataDir } from "./db/data-dir-lock.js";
import { type EmbeddedCluster, startEmbeddedCluster } from "./db/embedded.js";
import { migrate } from "./db/migrate.js";
import { createMetadataPool } from "./db/pool.js";
import { loadGuard } from "./guard/index.js";
import { createVerdictCache } from "./guard/verdict-cache.js";
import type { Logger } from "./log.js";
import type { InProcessSocket } from "./net/in-process-socket.js";
import { providerLookup } from "./providers/checked-connect.js";
import { providerHostsIn } from "./providers/provider-hosts.js";
import { createSecretBox, loadSecretKey } from "./providers/secret-box.js";
import { UpstreamPools } from "./providers/upstream-pools.js";
import type { AuthenticatedAgent } from "./proxy/agent-session.js";
import type { ProxyAccess } from "./proxy/proxy-access.js";
import { createProxyMetrics } from "./proxy/proxy-metrics.js";
import { startProxyServer } from "./proxy/proxy-server.js";
import { SessionDrain } from "./proxy/session-drain.js";
import { fundedShare } from "./proxy/session-funding.js";
import { SessionRegistry } from "./proxy/session-registry.js";
import { addressMatcher } from "./proxy/trusted-proxies.js";
import { UnauthenticatedConnections } from "./proxy/unauthenticated-connections.js";
import { UpstreamSlots } from "./proxy/upstream-slots.js";
import { buildApp } from "./rest/app.js";
import type { GatewayContext, Lifecycle } from "./rest/context.js";
import { createMetrics } from "./rest/plugins/metrics.js";
import { createMemoryStore, createRedisStore } from "./rest/plugins/rate-limit-store.js";
import { walletAuthWarning } from "./rest/wallet-auth-warning.js";
import { x402Gateway } from "./x402/gateway.js";

export interface RunningServer {
  httpUrl: string;
  /** postgres://host:port of the wire proxy. */
  proxyUrl: string;
  databaseUrl: string;
  /** The embedded cluster, when pgtoll started one (no DATABASE_URL). */
  embedded: EmbeddedCluster | null;
  /** A connection to the wire proxy from within this process (no TCP): see `RunningProxy.connectInProcess`. */
  connectInProcess(agent?: AuthenticatedAgent): InProcessSocket;
  /**
   * The graceful stop: `/ready` answers 503 and HTTP connections close after their answer, the wire proxy
   * refuses new connections and lets its sessions finish (PGTOLL_SHUTDOWN_GRACE_MS), then everything stops as
   * `stop()` does: in-flight requests answered, every window written, every hold given back.
   */
  drain(): Promise<void>;
  stop(): Promise<void>;
}

const EMBEDDED_DATABASE = "pgtoll";

function loadTls(config: Config) {
  if (!config.tlsCert && !config.tlsKey) return undefined;
  if (!config.tlsCert || !config.tlsKey)
    throw new Error("PGTOLL_TLS_CERT and PGTOLL_TLS_KEY must be set together");
  try {
    return createSecureContext({ cert: readFileSync(config.tlsCert), key: readFileSync(config.tlsKey) });
  } catch (error) {
    throw new Error(`could not load the TLS certificate or key: ${(error as Error).message}`);
  }
}

async function ensureDatabase(adminUrl: string, name: string): Promise<void> {
  const client = new pg.Client({ connectionString: adminUrl });
  await client.connect();
  try {
    const { rowCount } = await client.query("SELECT 1 FROM pg_database WHERE datname = $1", [name]);
    if (!rowCount) await client.query(`CREATE DATABASE "${name}"`);
  } finally {
    await client.end();
  }
}

/**
 * Starts pgtoll: locks the data directory, starts the embedded PostgreSQL unless DATABASE_URL is set, migrates,
 * and serves HTTP. `stop()` undoes each step in reverse order; a failed start undoes what it had done.
 */
export async function startServer(config: Config, logger: Logger): Promise<RunningServer> {
  const cleanups: (() => Promise<void> | void)[] = [];
  const stop = async () => {
    for (const cleanup of cleanups.reverse()) {
      try {
        await cleanup();
      } catch (error) {
        logger.warn({ err: error }, "error while stopping");
      }
    }
    cleanups.length = 0;
  };
  try {
    cleanups.push(lockDataDir(config.dataDir));
    let databaseUrl = config.databaseUrl;
    let embedded: EmbeddedCluster | null = null;
    if (!databaseUrl) {
      embedded = await startEmbeddedCluster(config.dataDir, {
        log: (line) => logger.debug({ postgres: line }),
        // This process holds the data directory's lock: a postmaster still running there is a dead pgtoll's.
        stopLeftover: true,
      });
      cleanups.push(() => embedded?.stop());
      if (embedded.stoppedLeftover)
        logger.warn(
          { pid: embedded.stoppedLeftover },
          "the embedded PostgreSQL of a pgtoll that is gone was still running in the data directory: stopped it cleanly before starting",
        );
      await ensureDatabase(embedded.adminUrl, EMBEDDED_DATABASE);
      databaseUrl = embedded.urlFor(EMBEDDED_DATABASE);
      logger.info({ port: embedded.port }, "embedded PostgreSQL started");
    }
    const db = createMetadataPool(databaseUrl);
    cleanups.push(() => db.end());
    const applied = await migrate(db);
    if (applied.length) logger.info({ applied }, "migrations applied");
    if (config.allowPrivilegedProviderRoles)
      logger.warn(
        "PGTOLL_ALLOW_PRIVILEGED_PROVIDER_ROLES is on: providers may register superuser or administrative roles, and every agent of theirs runs with those rights; for local experiments only",
      );
    const walletWarning = walletAuthWarning(config.host, config.restAgentAuth);
    if (walletWarning) logger.warn(walletWarning);
    await loadGuard();

    const box = createSecretBox(await loadSecretKey(config.secretKey, config.dataDir));
    const providerLookupFn = providerLookup(providerHostsIn(config));
    const upstream = new UpstreamPools({
      box,
      size: config.providerPoolSize,
      statementTimeoutMs: config.statementTimeoutMs,
      refuseSuperuser: !config.allowPrivilegedProviderRoles,
      maxMessageBytes: config.maxRowBytes,
      maxResultsInMemory: config.maxResultsInMemory,
      ...(providerLookupFn ? { lookup: providerLookupFn } : {}),
    });
    cleanups.push(() => upstream.closeAll());
    const verifier = createChainVerifier({
      rpcUrl: config.rpcUrl,
      chainId: config.chainId,
      tokenAddress: config.tokenAddress,
      minConfirmations: config.minConfirmations,
    });
    const x402 = x402Gateway(config, db, verifier);
    if (x402)
      logger.info(
        { facilitator: config.x402FacilitatorUrl ? new URL(config.x402FacilitatorUrl).origin : "pgtoll" },
        "x402 payments on",
      );
    const rateLimitStore = config.redisUrl
      ? createRedisStore(new Redis(config.redisUrl, { maxRetriesPerRequest: 1, enableOfflineQueue: false }))
      : createMemoryStore();
    cleanups.push(() => rateLimitStore.close());

    const metrics = createMetrics();
    // Pushed before the servers: their cleanups run first, so the refusals of their last statements are written.
    cleanups.push(startRefusalFlusher(metrics.refusals, db, logger));
    const tls = loadTls(config);
    const management = controlSettingsFrom(
      config,
      embedded?.adminUrl ?? maintenanceUrl(databaseUrl),
      tls !== undefined,
    );
    const chargeWriter = new ChargeWriter(db, {
      ttlSeconds: config.reservationTtlSeconds,
      onBatchWritten: (seconds) => metrics.ledger.observeBatch("proxy", seconds),
      onError: (error, charge) =>
        logger.error({ err: error, reservationId: charge.reservationId }, "a charge could not be written"),
    });
    metrics.ledger.watchWriter("proxy", chargeWriter);
    const limits = new DailyLimitWatch({ connectionString: databaseUrl, logger });
    await limits.start();
    cleanups.push(() => limits.close());
    metrics.ledger.watchHolds(db);
    // The proxy listens after the HTTP server: /mcp connects to it once it does.
    const proxyAccess: ProxyAccess = {};
    const lifecycle: Lifecycle = { draining: false };
    const ctx: GatewayContext = {
      config,
      lifecycle,
      proxy: proxyAccess,
      db,
      box,
      upstream,
      verifier,
      limits,
      rateLimitStore,
      metrics,
      logger,
      management,
      ...(x402 ? { x402 } : {}),
    };
    const app = await buildApp(ctx);
    cleanups.push(() => app.close());
    const address = await app.listen({ host: config.host, port: config.httpPort });

    // The proxy's own connections to the cluster, apart from the management plane's (they may be another process's).
    const endpointCluster = connectProjectCluster(management.clusterUrl, 2);
    cleanups.push(() => endpointCluster.close());
    const slots = new UpstreamSlots(
      config.proxyUpstreamLimit,
      config.proxyQueueTimeoutMs,
      fundedShare(config.proxyUpstreamLimit, config.fundedReservePercent),
    );
    const proxy = await startProxyServer(
      {
        db,
        box,
        slots,
        chargeWriter,
        limits,
        registry: new SessionRegistry(),
        ...(config.trustedProxies.length > 0
          ? {
              proxyProtocol: {
                trusted: addressMatcher(config.trustedProxies),
                required: config.proxyProtocol === "required",
              },
            }
          : {}),
        drain: new SessionDrain(),
        metrics: createProxyMetrics(metrics.registry, slots),
        logger,
        check: createVerdictCache(),
        tls,
        endpoints: {
          clusterUrl: management.clusterUrl,
          proxyHost: management.proxyHost,
          cluster: endpointCluster.admin,
        },
        statementTimeoutMs: config.statementTimeoutMs,
        allowPrivilegedProviderRoles: config.allowPrivilegedProviderRoles,
        ...(providerLookupFn ? { providerLookup: providerLookupFn } : {}),
        reservationTtlSeconds: config.reservationTtlSeconds,
        reserveRows: config.proxyReserveRows,
        reserveMaxRows: config.proxyReserveMaxRows,
        windowClock: new WindowClock(config.windowIntervalMs, chargeWriter),
        windowMaxCostMicro: config.windowMaxCostMicro,
        startupTimeoutMs: config.proxyStartupTimeoutMs,
        unauthenticated: new UnauthenticatedConnections({
          total: config.proxyMaxUnauthenticated,
          perAddress: config.proxyMaxUnauthenticatedPerAddress,
        }),
        maxConnections: config.proxyMaxConnections,
        sessionsPerAddress: config.proxySessionsPerIp,
        idleReleaseMs: 30_000,
        maxRowBytes: config.maxRowBytes,
        releases: new Set(),
        refusals: metrics.refusals,
        earnings: metrics.earnings,
      },
      { host: config.host, port: config.proxyPort },
    );
    cleanups.push(() => proxy.close());
    if (config.proxyPublicPort === undefined) management.proxyPort = proxy.port;
    proxyAccess.connect = (agent) => proxy.connectInProcess(agent);
    proxyAccess.reclaimIdleHolds = (wallet, providerId) => proxy.reclaimIdleHolds(wallet, providerId);

    await releaseExpiredReservations(db);
    const sweeper = setInterval(
      () => {
        releaseExpiredReservations(db).catch((error) =>
          logger.warn({ err: error }, "could not release expired reservations"),
        );
        // A crashed process's holds are given back within a third of their TTL of expiring.
      },
      Math.min(30_000, (config.reservationTtlSeconds * 1000) / 3),
    );
    sweeper.unref();
    cleanups.push(() => clearInterval(sweeper));

    const proxyHost = config.host.includes(":") ? `[${config.host}]` : config.host;
    return {
      httpUrl: address,
      proxyUrl: `postgres://${proxyHost}:${proxy.port}`,
      databaseUrl,
      embedded,
      connectInProcess: (agent) => proxy.connectInProcess(agent),
      async drain() {
        const started = performance.now();
        lifecycle.draining = true;
        // Load balancers see /ready answer 503 and stop sending connections before the listener closes.
        if (config.shutdownDelayMs > 0)
          await new Promise((resolve) => setTimeout(resolve, config.shutdownDelayMs));
        await proxy.drain(config.shutdownGraceMs);
        const sessionsMs = Math.round(performance.now() - started);
        await stop();
        logger.info(
          { sessionsMs, totalMs: Math.round(performance.now() - started) },
          "drained: every window written, every hold given back",
        );
      },
      stop,
    };
  } catch (error) {
    await stop();
    throw error;
  }
}
