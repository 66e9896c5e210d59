import type { FastifyInstance } from "fastify";
import fp from "fastify-plugin";
import { Counter, collectDefaultMetrics, Gauge, type Metric, Registry } from "prom-client";
import type { UpstreamPools } from "../../providers/upstream-pools.js";
import { ledgerMetrics } from "./ledger-metrics.js";
import { providerMetrics } from "./provider-metrics.js";
import { RequestDurations } from "./request-durations.js";
import { summingCounter } from "./summing-counter.js";

/** Every Prometheus metric pgtoll exports, in one registry per server (no globals). */
export function createMetrics() {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: "pgtoll_" });
  const httpDuration = new RequestDurations(
    "pgtoll_http_request_duration_seconds",
    "HTTP request latency by route and status",
    [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
  );
  // The registry only reads `name`, `type`, `aggregator`, `get()` and `reset()`, which it has.
  registry.registerMetric(httpDuration as unknown as Metric);
  let pools: Pick<UpstreamPools, "stats"> | undefined;
  new Gauge({
    name: "pgtoll_rest_upstream_waiting_requests",
    help: "POST /api/query requests waiting for a connection of their provider's pool",
    registers: [registry],
    collect() {
      this.set((pools?.stats() ?? []).reduce((sum, pool) => sum + pool.waiting, 0));
    },
  });
  return {
    registry,
    /** The REST surface's provider pools, whose waiting requests are exported. */
    watchPools(upstream: Pick<UpstreamPools, "stats">) {
      pools = upstream;
    },
    httpDuration,
    ...providerMetrics(registry),
    ledger: ledgerMetrics(registry),
    queries: summingCounter({
      name: "pgtoll_queries_total",
      help: "Metered queries by surface and outcome (ok, denied, invalid, insufficient_funds, failed)",
      labelNames: ["surface", "outcome"] as const,
      registers: [registry],
    }),
    rowsMetered: summingCounter({
      name: "pgtoll_rows_metered_total",
      help: "Rows charged for",
      labelNames: ["surface"] as const,
      registers: [registry],
    }),
    chargedMicro: summingCounter({
      name: "pgtoll_charged_micro_usdc_total",
      help: "Micro-USDC charged to agents",
      labelNames: ["surface"] as const,
      registers: [registry],
    }),
    depositsCredited: new Counter({
      name: "pgtoll_deposits_credited_total",
      help: "Deposits verified on chain and credited",
      registers: [registry],
    }),
    depositedMicro: new Counter({
      name: "pgtoll_deposited_micro_usdc_total",
      help: "Micro-USDC credited by deposits",
      registers: [registry],
    }),
  };
}

export type Metrics = ReturnType<typeof createMetrics>;

/** Times every request and serves the registry at GET /metrics. */
export const metricsPlugin = fp(async (app: FastifyInstance, options: { metrics: Metrics }) => {
  const { metrics } = options;
  app.addHook("onResponse", (request, reply, done) => {
    metrics.httpDuration.observe(
      request.method,
      request.routeOptions.url ?? "unmatched",
      reply.statusCode,
      reply.elapsedTime / 1000,
    );
    done();
  });
  app.get("/metrics", { config: { rateLimit: false }, schema: { hide: true } }, async (_request, reply) => {
    reply.header("Content-Type", metrics.registry.contentType);
    return metrics.registry.metrics();
  });
});
