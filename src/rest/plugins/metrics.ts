import type { FastifyInstance } from "fastify";
import fp from "fastify-plugin";
import { Counter, collectDefaultMetrics, type Metric, Registry } from "prom-client";
import { RefusalTally } from "../../analytics/refusal-tally.js";
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
  const refusals = new RefusalTally();
  return {
    /** Refused statements of every surface, counted in memory; written to refusal_counts by the server. */
    refusals,
    refusalsTotal: new Counter({
      name: "pgtoll_refusals_total",
      help: "Statements refused, by provider, kind (policy, funds) and rule (a guard rule, invalid-sql, insufficient-balance, balance-cut-off)",
      labelNames: ["provider", "kind", "rule"] as const,
      registers: [registry],
      collect() {
        for (const { providerId, kind, rule, refusals: count } of refusals.drainForMetrics())
          this.inc({ provider: providerId, kind, rule }, count);
      },
    }),
    registry,
    httpDuration,
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
