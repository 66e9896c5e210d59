import { describe, expect, it } from "vitest";
import { loadSettings } from "../../bench/settings.js";

describe("bench settings", () => {
  it("prices the provider at 0.1 USDC per 1 000 rows unless PGTOLL_BENCH_PRICE says otherwise", () => {
    expect(loadSettings({}).basePricePer1000Rows).toBe(0.1);
    expect(loadSettings({ PGTOLL_BENCH_PRICE: "0" }).basePricePer1000Rows).toBe(0);
    expect(loadSettings({ PGTOLL_BENCH_PRICE: "2.5" }).basePricePer1000Rows).toBe(2.5);
  });

  it("refuses a price that is not a non-negative amount with at most 6 decimals", () => {
    for (const raw of ["-1", "free", "0.0000001", "1e3"]) {
      expect(() => loadSettings({ PGTOLL_BENCH_PRICE: raw })).toThrow(/PGTOLL_BENCH_PRICE must be a price/);
    }
  });
});
