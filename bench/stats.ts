/** Min, median and max of a measurement repeated `values.length` times. */
export interface Spread {
  min: number;
  median: number;
  max: number;
  values: number[];
}

export function spread(values: readonly number[]): Spread {
  if (values.length === 0) return { min: Number.NaN, median: Number.NaN, max: Number.NaN, values: [] };
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  const median = sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
  return { min: sorted[0]!, median, max: sorted[sorted.length - 1]!, values: [...values] };
}

/** Nearest-rank percentile (`p` in 0..100) of an ascending array; NaN when empty. */
export function percentile(sorted: ArrayLike<number>, p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length, Math.max(1, rank)) - 1]!;
}

/** Joins several samples into one ascending Float64Array (for percentiles pooled over repetitions). */
export function pooled(samples: readonly Float64Array[]): Float64Array {
  const total = samples.reduce((sum, sample) => sum + sample.length, 0);
  const out = new Float64Array(total);
  let at = 0;
  for (const sample of samples) {
    out.set(sample, at);
    at += sample.length;
  }
  return out.sort();
}

/** p50/p99 of latencies in microseconds, pooled over every repetition. */
export interface LatencySummary {
  p50Us: number;
  p99Us: number;
  samples: number;
}

export function summariseLatency(samplesUs: readonly Float64Array[]): LatencySummary {
  const all = pooled(samplesUs);
  return { p50Us: percentile(all, 50), p99Us: percentile(all, 99), samples: all.length };
}
