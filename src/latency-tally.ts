import type { Histogram } from "prom-client";

/**
 * Observations not yet moved into a histogram: a count per bucket (the last one is +Inf), their sum and count.
 * prom-client's `observe` builds label objects and a closure per call; this is a loop over the bounds. The
 * proxy's upstream latency and the HTTP request durations (one per route, method and status) are kept in these.
 */
export class LatencyTally {
  readonly counts: Float64Array;
  sum = 0;
  count = 0;

  constructor(readonly bounds: readonly number[]) {
    this.counts = new Float64Array(bounds.length + 1);
  }

  observe(seconds: number): void {
    const { bounds } = this;
    let bucket = 0;
    while (bucket < bounds.length && seconds > bounds[bucket]!) bucket++;
    this.counts[bucket]!++;
    this.sum += seconds;
    this.count++;
  }

  /**
   * Adds what was observed to an unlabelled prom-client Histogram with the same buckets, as its own `observe`
   * would have, and starts over. Writes prom-client's per-label state (`hashMap[""]`: `bucketValues` keyed by
   * upper bound, `sum`, `count`); proxy-metrics.test.ts compares the result with `observe`'s.
   */
  drainInto(histogram: Histogram): void {
    if (this.count === 0) return;
    const state = histogram as unknown as {
      hashMap: Record<string, { bucketValues: Record<number, number>; sum: number; count: number }>;
    };
    if (!state.hashMap[""]) histogram.zero({});
    const values = state.hashMap[""]!;
    for (let i = 0; i < this.bounds.length; i++) values.bucketValues[this.bounds[i]!]! += this.counts[i]!;
    values.sum += this.sum;
    values.count += this.count;
    this.counts.fill(0);
    this.sum = 0;
    this.count = 0;
  }
}
