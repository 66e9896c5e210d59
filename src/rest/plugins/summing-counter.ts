import { Counter, type CounterConfiguration, type LabelValues } from "prom-client";

/** What a hot path increments: one labelled series of a {@link summingCounter}. */
export interface SummedSeries {
  inc(value?: number): void;
}

/**
 * A prom-client Counter with `summed(labels)`: a series whose increments add up in a plain number and reach the
 * counter when the registry reads it. prom-client checks the labels and builds a key from them on every
 * increment, and the query path counts three things per request. The counter itself works as usual.
 */
export function summingCounter<T extends string>(
  config: CounterConfiguration<T>,
): Counter<T> & { summed(labels: LabelValues<T>): SummedSeries } {
  const series: { labels: LabelValues<T>; total: number }[] = [];
  const counter = new Counter<T>({
    ...config,
    collect() {
      for (const one of series) {
        if (one.total === 0) continue;
        counter.inc(one.labels, one.total);
        one.total = 0;
      }
    },
  });
  return Object.assign(counter, {
    summed(labels: LabelValues<T>): SummedSeries {
      const one = { labels, total: 0 };
      series.push(one);
      return {
        inc(value = 1) {
          if (!(value >= 0 && value < Number.POSITIVE_INFINITY))
            throw new TypeError(`a counter only grows, by a finite amount: ${value}`);
          one.total += value;
        },
      };
    },
  });
}
