import { Counter, Gauge, Histogram, type Registry } from "prom-client";
import { LatencyTally } from "../latency-tally.js";

/**
 * Counts the relay adds to on every statement and chunk. Plain numbers: a labelled prom-client `inc` hashes
 * its labels on every call. They are moved into the counters below whenever those are read (`collect`), so
 * /metrics is always current.
 */
export interface ProxyTally {
  verdicts: { allow: number; deny: number; invalid: number };
  cutOff: number;
  bytesFromClient: number;
  bytesFromUpstream: number;
  rowsRelayed: number;
  /** Writes rolled back because the balance did not pay for them or they wrote more rows than allowed. */
  writesUndone: number;
  /** From forwarding a query or Execute to its completion. */
  upstreamLatency: LatencyTally;
}

const LATENCY_BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10];

/**
 * The wire proxy's Prometheus metrics, registered in the server's registry; `slots` (when given) are the upstream
 * sessions whose waiters `pgtoll_proxy_upstream_waiting_sessions` counts.
 */
export function createProxyMetrics(registry: Registry, slots?: { readonly totalWaiting: number }) {
  const registers = [registry];
  const tally: ProxyTally = {
    verdicts: { allow: 0, deny: 0, invalid: 0 },
    cutOff: 0,
    bytesFromClient: 0,
    bytesFromUpstream: 0,
    rowsRelayed: 0,
    writesUndone: 0,
    upstreamLatency: new LatencyTally(LATENCY_BUCKETS),
  };
  return {
    tally,
    sessionsActive: new Gauge({
      name: "pgtoll_proxy_sessions_active",
      help: "Client sessions open now",
      registers,
    }),
    upstreamWaiting: new Gauge({
      name: "pgtoll_proxy_upstream_waiting_sessions",
      help: "Client sessions waiting for an upstream session of their provider (PGTOLL_PROXY_UPSTREAM_LIMIT)",
      registers,
      collect() {
        this.set(slots?.totalWaiting ?? 0);
      },
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
    proxyHeaders: new Counter({
      name: "pgtoll_proxy_protocol_headers_total",
      help: "PROXY protocol headers by outcome: accepted, local (no client address), missing, invalid, untrusted",
      labelNames: ["outcome"] as const,
      registers,
    }),
    statements: new Counter({
      name: "pgtoll_proxy_statements_total",
      help: "Statements by guard verdict (allow, deny, invalid) and cut_off for results stopped by the balance",
      labelNames: ["verdict"] as const,
      registers,
      collect() {
        const { verdicts } = tally;
        for (const verdict of ["allow", "deny", "invalid"] as const) {
          if (verdicts[verdict] > 0) this.inc({ verdict }, verdicts[verdict]);
          verdicts[verdict] = 0;
        }
        if (tally.cutOff > 0) this.inc({ verdict: "cut_off" }, tally.cutOff);
        tally.cutOff = 0;
      },
    }),
    rowsRelayed: new Counter({
      name: "pgtoll_proxy_rows_relayed_total",
      help: "DataRow and CopyData messages relayed to clients",
      registers,
      collect() {
        if (tally.rowsRelayed > 0) this.inc(tally.rowsRelayed);
        tally.rowsRelayed = 0;
      },
    }),
    bytesRelayed: new Counter({
      name: "pgtoll_proxy_bytes_relayed_total",
      help: "Bytes relayed, by direction (client_to_upstream, upstream_to_client)",
      labelNames: ["direction"] as const,
      registers,
      collect() {
        if (tally.bytesFromClient > 0) this.inc({ direction: "client_to_upstream" }, tally.bytesFromClient);
        if (tally.bytesFromUpstream > 0)
          this.inc({ direction: "upstream_to_client" }, tally.bytesFromUpstream);
        tally.bytesFromClient = 0;
        tally.bytesFromUpstream = 0;
      },
    }),
    upstreamLatency: new Histogram({
      name: "pgtoll_proxy_upstream_latency_seconds",
      help: "From forwarding a query or Execute to its completion",
      buckets: LATENCY_BUCKETS,
      registers,
      collect() {
        tally.upstreamLatency.drainInto(this);
      },
    }),
    chargedMicro: new Counter({
      name: "pgtoll_proxy_charged_micro_usdc_total",
      help: "Micro-USDC charged for proxied statements",
      registers,
    }),
    writesUndone: new Counter({
      name: "pgtoll_proxy_writes_rolled_back_total",
      help: "Writes rolled back before they committed: unpaid, or more rows than the provider allows per statement",
      registers,
      collect() {
        if (tally.writesUndone > 0) this.inc(tally.writesUndone);
        tally.writesUndone = 0;
      },
    }),
  };
}

export type ProxyMetrics = ReturnType<typeof createProxyMetrics>;
