import { Counter, Gauge, Histogram, type Registry } from "prom-client";

/** The wire proxy's Prometheus metrics, registered in the server's registry. */
export function createProxyMetrics(registry: Registry) {
  const registers = [registry];
  return {
    sessionsActive: new Gauge({
      name: "pgtoll_proxy_sessions_active",
      help: "Client sessions open now",
      registers,
    }),
    sessionsTotal: new Counter({
      name: "pgtoll_proxy_sessions_total",
      help: "Client sessions that reached the ready phase",
      registers,
    }),
    sessionsRefused: new Counter({
      name: "pgtoll_proxy_sessions_refused_total",
      help: "Connections refused before the ready phase, by reason",
      labelNames: ["reason"] as const,
      registers,
    }),
    statements: new Counter({
      name: "pgtoll_proxy_statements_total",
      help: "Statements by guard verdict (allow, deny, invalid) and cut_off for results stopped by the balance",
      labelNames: ["verdict"] as const,
      registers,
    }),
    rowsRelayed: new Counter({
      name: "pgtoll_proxy_rows_relayed_total",
      help: "DataRow and CopyData messages relayed to clients",
      registers,
    }),
    bytesRelayed: new Counter({
      name: "pgtoll_proxy_bytes_relayed_total",
      help: "Bytes relayed, by direction (client_to_upstream, upstream_to_client)",
      labelNames: ["direction"] as const,
      registers,
    }),
    upstreamLatency: new Histogram({
      name: "pgtoll_proxy_upstream_latency_seconds",
      help: "From forwarding a query or Execute to its completion",
      buckets: [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10],
      registers,
    }),
    chargedMicro: new Counter({
      name: "pgtoll_proxy_charged_micro_usdc_total",
      help: "Micro-USDC charged for proxied statements",
      registers,
    }),
    unpaidMicro: new Counter({
      name: "pgtoll_proxy_unpaid_micro_usdc_total",
      help: "Cost of writes beyond what the agent's balance could cover (not charged: balances never go negative)",
      registers,
    }),
  };
}

export type ProxyMetrics = ReturnType<typeof createProxyMetrics>;
