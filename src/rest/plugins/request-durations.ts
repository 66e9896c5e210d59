import { LatencyTally } from "../../latency-tally.js";

/** One method, route and status. */
interface Series {
  labels: { method: string; route: string; status_code: string };
  tally: LatencyTally;
}

/** A value as prom-client's Registry reads it from a metric's `get()`. */
interface MetricValue {
  labels: Record<string, string | number>;
  value: number;
  metricName: string;
}

/**
 * A Prometheus histogram of HTTP request durations in seconds, labelled method, route and status_code, which a
 * prom-client Registry exposes like its own Histogram (same `get()` shape, so the same text). Observing is three
 * map lookups and a few additions: prom-client's Histogram checks its labels and builds a string key from them on
 * every observation, which costs more than the rest of timing a request.
 */
export class RequestDurations {
  readonly type = "histogram";
  readonly aggregator = "sum";
  readonly #bounds: number[];
  /** route -> method -> status code -> series */
  readonly #series = new Map<string, Map<string, Map<number, Series>>>();

  constructor(
    readonly name: string,
    readonly help: string,
    buckets: readonly number[],
  ) {
    this.#bounds = [...buckets].sort((a, b) => a - b);
  }

  observe(method: string, route: string, statusCode: number, seconds: number): void {
    let byMethod = this.#series.get(route);
    if (!byMethod) {
      byMethod = new Map();
      this.#series.set(route, byMethod);
    }
    let byStatus = byMethod.get(method);
    if (!byStatus) {
      byStatus = new Map();
      byMethod.set(method, byStatus);
    }
    let series = byStatus.get(statusCode);
    if (!series) {
      series = {
        labels: { method, route, status_code: String(statusCode) },
        tally: new LatencyTally(this.#bounds),
      };
      byStatus.set(statusCode, series);
    }
    series.tally.observe(seconds);
  }

  async get(): Promise<{
    name: string;
    help: string;
    type: string;
    values: MetricValue[];
    aggregator: string;
  }> {
    const values: MetricValue[] = [];
    for (const byMethod of this.#series.values()) {
      for (const byStatus of byMethod.values()) {
        for (const { labels, tally } of byStatus.values()) {
          const { counts, sum, count } = tally;
          let cumulative = 0;
          for (let i = 0; i <= this.#bounds.length; i++) {
            cumulative += counts[i]!;
            values.push({
              labels: { le: i < this.#bounds.length ? this.#bounds[i]! : "+Inf", ...labels },
              value: cumulative,
              metricName: `${this.name}_bucket`,
            });
          }
          values.push({ labels, value: sum, metricName: `${this.name}_sum` });
          values.push({ labels, value: count, metricName: `${this.name}_count` });
        }
      }
    }
    return { name: this.name, help: this.help, type: this.type, values, aggregator: this.aggregator };
  }

  reset(): void {
    this.#series.clear();
  }
}
