import { Histogram, type Metric, Registry } from "prom-client";
import { describe, expect, it } from "vitest";
import { RequestDurations } from "./request-durations.js";

const NAME = "test_request_duration_seconds";
const HELP = "HTTP request latency by route and status";
const BUCKETS = [0.001, 0.01, 0.1, 1];

const observations: [method: string, route: string, status: number, seconds: number][] = [
  ["GET", "/api/health", 200, 0.0004],
  ["GET", "/api/health", 200, 0.001],
  ["GET", "/api/health", 200, 0.05],
  ["GET", "/api/health", 503, 2.5],
  ["POST", "/api/query", 200, 0.0123],
  ["POST", "/api/query", 402, 0.002],
  ["GET", "unmatched", 404, 0],
  ["POST", 'odd "route"\\', 200, 0.3],
];

function registryWith(metric: Metric): Registry {
  const registry = new Registry();
  registry.registerMetric(metric);
  return registry;
}

describe("RequestDurations", () => {
  it("is exposed exactly as prom-client's Histogram with the same observations", async () => {
    const reference = new Histogram({
      name: NAME,
      help: HELP,
      labelNames: ["method", "route", "status_code"] as const,
      buckets: BUCKETS,
      registers: [],
    });
    const durations = new RequestDurations(NAME, HELP, BUCKETS);
    for (const [method, route, status, seconds] of observations) {
      reference.observe({ method, route, status_code: String(status) }, seconds);
      durations.observe(method, route, status, seconds);
    }
    const expected = await registryWith(reference).metrics();
    const actual = await registryWith(durations as unknown as Metric).metrics();
    expect(actual).toBe(expected);
    expect(actual).toContain(
      `${NAME}_bucket{le="+Inf",method="GET",route="/api/health",status_code="503"} 1`,
    );
    // prom-client's own values also carry an empty `exemplar`.
    const [referenceJson] = await registryWith(reference).getMetricsAsJSON();
    const withoutExemplars = referenceJson!.values.map((value) => {
      const { exemplar: _, ...rest } = value as typeof value & { exemplar?: unknown };
      return rest;
    });
    expect(await registryWith(durations as unknown as Metric).getMetricsAsJSON()).toEqual([
      { ...referenceJson, values: withoutExemplars },
    ]);
  });

  it("starts over when the registry resets its metrics", async () => {
    const durations = new RequestDurations(NAME, HELP, BUCKETS);
    durations.observe("GET", "/api/health", 200, 0.01);
    const registry = registryWith(durations as unknown as Metric);
    registry.resetMetrics();
    expect((await durations.get()).values).toEqual([]);
  });
});
