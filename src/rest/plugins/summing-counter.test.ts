import { Registry } from "prom-client";
import { describe, expect, it } from "vitest";
import { summingCounter } from "./summing-counter.js";

function counterIn(registry: Registry) {
  return summingCounter({
    name: "test_rows_total",
    help: "Rows",
    labelNames: ["surface"] as const,
    registers: [registry],
  });
}

describe("summingCounter", () => {
  it("hands a series' increments to the counter whenever the registry reads it", async () => {
    const registry = new Registry();
    const counter = counterIn(registry);
    const rest = counter.summed({ surface: "rest" });
    rest.inc();
    rest.inc(41);
    counter.inc({ surface: "wire" }, 5);
    counter.inc({ surface: "rest" }, 8);
    expect(await registry.metrics()).toContain('test_rows_total{surface="rest"} 50');
    expect(await registry.metrics()).toContain('test_rows_total{surface="rest"} 50');
    rest.inc(0);
    rest.inc(2);
    expect((await counter.get()).values).toEqual(
      expect.arrayContaining([
        { labels: { surface: "rest" }, value: 52 },
        { labels: { surface: "wire" }, value: 5 },
      ]),
    );
  });

  it("refuses to go down or to infinity", () => {
    const series = counterIn(new Registry()).summed({ surface: "rest" });
    expect(() => series.inc(-1)).toThrow(TypeError);
    expect(() => series.inc(Number.NaN)).toThrow(TypeError);
    expect(() => series.inc(Number.POSITIVE_INFINITY)).toThrow(TypeError);
  });
});
