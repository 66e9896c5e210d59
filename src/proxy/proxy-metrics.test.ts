import { Histogram, Registry } from "prom-client";
import { describe, expect, it } from "vitest";
import { createProxyMetrics } from "./proxy-metrics.js";

const LATENCY = "pgtoll_proxy_upstream_latency_seconds";

describe("proxy metrics", () => {
  it("reports tallied latencies exactly as prom-client's own observe would", async () => {
    const registry = new Registry();
    const metrics = createProxyMetrics(registry);
    const reference = new Registry();
    const observed = new Histogram({
      name: LATENCY,
      help: (await registry.getSingleMetric(LATENCY)!.get()).help,
      buckets: [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10],
      registers: [reference],
    });
    const samples = [
      [0, 0.00005, 0.0001, 0.0003],
      [0.02, 3],
      [20, 0.0001, 10],
    ];
    for (const batch of samples) {
      for (const seconds of batch) {
        metrics.tally.upstreamLatency.observe(seconds);
        observed.observe(seconds);
      }
      expect(await registry.getSingleMetricAsString(LATENCY)).toBe(
        await reference.getSingleMetricAsString(LATENCY),
      );
    }
    expect(await registry.getSingleMetricAsString(LATENCY)).toMatch(/_count 9$/m);
  });

  it("moves tallied counts into the counters once, when they are read", async () => {
    const registry = new Registry();
    const metrics = createProxyMetrics(registry);
    metrics.tally.verdicts.allow += 3;
    metrics.tally.verdicts.deny += 1;
    metrics.tally.cutOff += 2;
    metrics.tally.rowsRelayed += 5;
    metrics.tally.bytesFromClient += 10;
    metrics.tally.bytesFromUpstream += 20;
    for (let read = 0; read < 2; read++) {
      const text = await registry.metrics();
      expect(text).toMatch(/^pgtoll_proxy_statements_total\{verdict="allow"\} 3$/m);
      expect(text).toMatch(/^pgtoll_proxy_statements_total\{verdict="deny"\} 1$/m);
      expect(text).not.toMatch(/verdict="invalid"/);
      expect(text).toMatch(/^pgtoll_proxy_statements_total\{verdict="cut_off"\} 2$/m);
      expect(text).toMatch(/^pgtoll_proxy_rows_relayed_total 5$/m);
      expect(text).toMatch(/^pgtoll_proxy_bytes_relayed_total\{direction="client_to_upstream"\} 10$/m);
      expect(text).toMatch(/^pgtoll_proxy_bytes_relayed_total\{direction="upstream_to_client"\} 20$/m);
    }
  });
});
