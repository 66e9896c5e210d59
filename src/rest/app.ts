import { randomUUID } from "node:crypto";
import type { IncomingMessage } from "node:http";
import type { Socket } from "node:net";
import swagger from "@fastify/swagger";
import swaggerUi from "@fastify/swagger-ui";
import Fastify, { type FastifyBaseLogger, type FastifyInstance } from "fastify";
import { remoteMcpRoutes } from "../mcp/remote-mcp.js";
import { fundedShare } from "../proxy/session-funding.js";
import type { GatewayContext } from "./context.js";
import { lazyRequestLogger } from "./lazy-request-logger.js";
import { decorateClientAddress } from "./plugins/client-address.js";
import { corsPlugin } from "./plugins/cors.js";
import { errorsPlugin } from "./plugins/errors.js";
import { metricsPlugin } from "./plugins/metrics.js";
import { gatewayLimits, rateLimitPlugin } from "./plugins/rate-limit.js";
import { RequestLog } from "./request-log.js";
import { agentLimitRoutes } from "./routes/agent-limits.js";
import { agentRoutes } from "./routes/agents.js";
import { analyticsRoutes } from "./routes/analytics.js";
import { catalogRoutes } from "./routes/catalog.js";
import { consoleRoutes } from "./routes/console.js";
import { depositRoutes } from "./routes/deposit.js";
import { discoveryRoutes } from "./routes/discovery.js";
import { healthRoutes } from "./routes/health.js";
import { probeRoutes } from "./routes/probes.js";
import { providerSettingsRoutes } from "./routes/provider-settings.js";
import { providerRoutes } from "./routes/providers.js";
import { queryRoutes } from "./routes/query.js";
import { rankingRoutes } from "./routes/rankings.js";
import { topUpRoutes } from "./routes/topup.js";
import { managementApi } from "./v2/index.js";

/**
 * The HTTP server: payment gateway routes under /api, /metrics, and the OpenAPI document at /docs, each
 * concern a plugin. All state comes in through `ctx`.
 */
export async function buildApp(ctx: GatewayContext): Promise<FastifyInstance> {
  const app = Fastify({
    loggerInstance: ctx.logger as FastifyBaseLogger,
    logController: new RequestLog(ctx.logger),
    childLoggerFactory: lazyRequestLogger,
    bodyLimit: ctx.config.bodyLimit,
    // Slow or silent clients (slowloris) are cut off instead of holding a socket and a parser forever.
    requestTimeout: ctx.config.httpRequestTimeoutMs,
    // Node enforces those timeouts on a sweep (every 30 s by default): sweep often enough that a slow client
    // is cut off close to its deadline, not up to half a minute later.
    http: { connectionsCheckingInterval: Math.min(5000, Math.max(250, ctx.config.httpRequestTimeoutMs / 2)) },
    trustProxy: ctx.config.trustProxy,
    requestIdHeader: "x-request-id",
    genReqId: () => randomUUID(),
    ajv: { customOptions: { coerceTypes: false, removeAdditional: false } },
  });

  decorateClientAddress(app);
  app.server.headersTimeout = Math.min(ctx.config.httpRequestTimeoutMs, 60_000);
  app.server.maxConnections = ctx.config.httpMaxConnections;
  // Node starts its header and request timeouts at a request's first byte, so a client that connects and
  // sends nothing would hold its socket forever: it gets the request timeout too, cleared once a request
  // arrives (between keep-alive requests Node's own keepAliveTimeout applies).
  app.server.on("connection", (socket: Socket) => socket.setTimeout(ctx.config.httpRequestTimeoutMs));
  app.server.on("request", (request: IncomingMessage) => request.socket.setTimeout(0));

  // Bodies are JSON only: any other content type is a 415, not a string that fails validation later.
  app.removeContentTypeParser("text/plain");
  // Set before anything can answer, so every response carries it, preflights and errors included.
  app.addHook("onRequest", (request, reply, done) => {
    reply.header("X-Request-Id", request.id);
    done();
  });
  // A stopping process answers what reaches it (requests begun before the stop too) but keeps no connection
  // open after: the client's next request goes to another process, and the server can close.
  app.addHook("onSend", (_request, reply, payload, done) => {
    if (ctx.lifecycle?.draining) reply.header("Connection", "close");
    done(null, payload);
  });

  await app.register(errorsPlugin);
  // The gateway's CORS is the spec's; the management API (Neon's shape) also needs Authorization and PATCH.
  const exposedHeaders = [
    "X-RateLimit-Limit",
    "X-RateLimit-Remaining",
    "X-RateLimit-Reset",
    "Retry-After",
    "X-Request-Id",
    ...(ctx.x402 ? ["PAYMENT-REQUIRED", "PAYMENT-RESPONSE"] : []),
  ];
  // x402 clients send PAYMENT-SIGNATURE (and ask for the response headers to be exposed).
  const gatewayHeaders = [
    "Content-Type",
    "X-API-Key",
    ...(ctx.config.restAgentAuth === "signature" ? ["Authorization"] : []),
    ...(ctx.x402 ? ["PAYMENT-SIGNATURE", "Access-Control-Expose-Headers"] : []),
  ];
  await app.register(corsPlugin, {
    exposedHeaders,
    policy: { methods: ["GET", "POST", "PUT", "DELETE", "OPTIONS"], allowedHeaders: gatewayHeaders },
    byPrefix: {
      "/api/v2/": {
        methods: ["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"],
        allowedHeaders: ["Content-Type", "Authorization", "Accept"],
      },
    },
  });
  await app.register(metricsPlugin, { metrics: ctx.metrics });
  ctx.metrics.watchPools(ctx.upstream);
  await app.register(rateLimitPlugin, {
    enabled: ctx.config.rateLimit,
    store: ctx.rateLimitStore,
    defaultRule: gatewayLimits.general,
    onStoreError: (error) =>
      ctx.logger.warn({ err: error }, "rate-limit store unavailable; request let through"),
  });
  await app.register(swagger, {
    openapi: {
      info: {
        title: "pgtoll",
        version: "1.0.0",
        description: "Metered SQL access to PostgreSQL, paid in USDC.",
      },
      components: { securitySchemes: { apiKey: { type: "apiKey", in: "header", name: "X-API-Key" } } },
    },
  });
  await app.register(swaggerUi, { routePrefix: "/docs", uiConfig: { deepLinking: true } });
  app.addHook("onRoute", (route) => {
    if (route.url.startsWith("/docs")) route.config = { ...(route.config as object), rateLimit: false };
  });

  await app.register(providerRoutes, { ctx });
  await app.register(providerSettingsRoutes, { ctx });
  await app.register(analyticsRoutes, { ctx });
  await app.register(rankingRoutes, { ctx });
  await app.register(agentRoutes, { ctx });
  await app.register(agentLimitRoutes, { ctx });
  await app.register(depositRoutes, { ctx });
  await app.register(queryRoutes, { ctx });
  await app.register(catalogRoutes, { ctx });
  await app.register(discoveryRoutes, { ctx });
  await app.register(topUpRoutes, { ctx });
  await app.register(healthRoutes, { ctx });
  await app.register(probeRoutes, { ctx });
  await app.register(consoleRoutes);
  await app.register(managementApi, { prefix: "/api/v2", ctx });
  if (ctx.proxy)
    await app.register(remoteMcpRoutes, {
      ctx,
      proxy: ctx.proxy,
      perAgentPerMinute: ctx.config.mcpRateLimit,
      sessionsPerAddress: ctx.config.mcpSessionsPerIp,
      maxSessions: ctx.config.mcpMaxSessions,
      reservedForFunded: fundedShare(ctx.config.mcpMaxSessions, ctx.config.fundedReservePercent),
      proxyIdleMs: ctx.config.mcpProxyIdleMs,
    });
  return app;
}
