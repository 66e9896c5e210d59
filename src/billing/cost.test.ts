import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  costBreakdown,
  costOfRows,
  formatPrice,
  formatPricePer1000Rows,
  isFree,
  msAffordable,
  type Price,
  type PriceSettings,
  parsePrice,
  parsePricePer1000Rows,
  priceForRelations,
  priceOf,
  rowsAffordable,
  statementCost,
} from "./cost.js";
import { formatMicro, numberToMicro, parseMicro } from "./money.js";
import { PricingError, parsePricing } from "./pricing.js";

const price = (basePricePer1000Rows: number, markupMultiplier: number): Price =>
  priceOf(parsePricing(basePricePer1000Rows, markupMultiplier));

const priceArb = fc
  .record({
    priceMicroPer1000Rows: fc.bigInt({ min: 0n, max: 1_000_000_000_000n }),
    markupPpm: fc.bigInt({ min: 1_000_000n, max: 100_000_000n }),
  })
  .map(priceOf);

describe("cost rule", () => {
  it("matches worked examples", () => {
    expect(costOfRows(1000, price(1, 1))).toBe(1_000_000n);
    expect(costOfRows(1, price(1, 1))).toBe(1000n);
    expect(costOfRows(3, price(0.001, 1.5))).toBe(5n); // 4.5 micro-USDC, rounded up
    expect(costOfRows(250, price(0.5, 2))).toBe(250_000n);
    expect(costOfRows(0, price(1000, 100))).toBe(0n);
    expect(costOfRows(7, price(0.000001, 1))).toBe(1n);
  });

  it("is the exact product rounded up to the next micro-USDC", () => {
    fc.assert(
      fc.property(fc.bigInt({ min: 0n, max: 10_000_000_000n }), priceArb, (rows, p) => {
        const cost = costOfRows(rows, p);
        const exactTimes1e9 = rows * p.picoUsdcPer1000Rows;
        expect(cost * 1_000_000_000n >= exactTimes1e9).toBe(true);
        expect((cost - 1n) * 1_000_000_000n < exactTimes1e9 || cost === 0n).toBe(true);
      }),
    );
  });

  it("is monotonic in rows and never charges 0 rows", () => {
    fc.assert(
      fc.property(
        fc.bigInt({ min: 0n, max: 1_000_000_000n }),
        fc.bigInt({ min: 0n, max: 1000n }),
        priceArb,
        (rows, extra, p) => {
          expect(costOfRows(rows + extra, p) >= costOfRows(rows, p)).toBe(true);
          expect(costOfRows(0n, p)).toBe(0n);
        },
      ),
    );
  });

  it("charging statements one by one never costs less than charging them together", () => {
    fc.assert(
      fc.property(
        fc.array(fc.integer({ min: 0, max: 100_000 }), { maxLength: 20 }),
        priceArb,
        (counts, p) => {
          const separately = counts.reduce((sum, n) => sum + costOfRows(n, p), 0n);
          const together = costOfRows(
            counts.reduce((a, b) => a + b, 0),
            p,
          );
          expect(separately >= together).toBe(true);
          expect(separately - together <= BigInt(counts.length)).toBe(true);
        },
      ),
    );
  });

  it("rowsAffordable is the largest row count the budget pays for", () => {
    fc.assert(
      fc.property(fc.bigInt({ min: 0n, max: 10_000_000_000n }), priceArb, (budget, p) => {
        fc.pre(p.picoUsdcPer1000Rows > 0n);
        const rows = rowsAffordable(budget, p);
        expect(costOfRows(rows, p) <= budget).toBe(true);
        expect(costOfRows(rows + 1n, p) > budget).toBe(true);
      }),
    );
  });

  it("prints a price exactly, below the micro-USDC too, and reads it back", () => {
    expect(formatPricePer1000Rows(price(0.06, 1))).toBe("0.060000");
    expect(formatPricePer1000Rows(price(0.000001, 1.5))).toBe("0.0000015");
    expect(formatPricePer1000Rows(price(3, 1.333333))).toBe("3.999999");
    expect(formatPricePer1000Rows(price(0.000007, 1.000001))).toBe("0.000007000007");
    fc.assert(
      fc.property(priceArb, (p) => {
        expect(parsePricePer1000Rows(formatPricePer1000Rows(p))).toEqual(p);
      }),
    );
    for (const text of ["", "1", "1.", ".5", "-1.000000", "1e3", "0.0000000000001"])
      expect(parsePricePer1000Rows(text)).toBeNull();
  });

  it("rejects a negative row count", () => {
    expect(() => costOfRows(-1, price(1, 1))).toThrow(RangeError);
  });
});

describe("money", () => {
  it("formats with exactly 6 decimals", () => {
    expect(formatMicro(1_500_000n)).toBe("1.500000");
    expect(formatMicro(0n)).toBe("0.000000");
    expect(formatMicro(-1000n)).toBe("-0.001000");
    expect(formatMicro(123_456_789_012n)).toBe("123456.789012");
  });

  it("round-trips through parseMicro", () => {
    fc.assert(
      fc.property(fc.bigInt({ min: -(10n ** 18n), max: 10n ** 18n }), (micro) => {
        expect(parseMicro(formatMicro(micro))).toBe(micro);
      }),
    );
    expect(parseMicro("1.2345678")).toBeNull();
    expect(parseMicro("1e6")).toBeNull();
  });

  it("converts JSON numbers with at most 6 decimals exactly", () => {
    expect(numberToMicro(0.1)).toBe(100_000n);
    expect(numberToMicro(0.000001)).toBe(1n);
    expect(numberToMicro(1e-7)).toBeNull();
    expect(numberToMicro(Number.NaN)).toBeNull();
    expect(numberToMicro(Number.POSITIVE_INFINITY)).toBeNull();
  });
});

describe("pricing validation", () => {
  it("accepts sane prices", () => {
    expect(parsePricing(0.5, 1.25)).toEqual({ priceMicroPer1000Rows: 500_000n, markupPpm: 1_250_000n });
    expect(parsePricing(0, 1)).toEqual({ priceMicroPer1000Rows: 0n, markupPpm: 1_000_000n });
  });

  it.each([
    [-1, 1, /between 0/],
    [1_000_001, 1, /between 0/],
    [0.0000001, 1, /6 decimals/],
    [Number.NaN, 1, /finite/],
    ["1", 1, /finite number/],
    [1, 0.5, /between 1/],
    [1, 101, /between 1/],
    [1, 1.0000001, /6 decimals/],
    [1, null, /finite number/],
  ])("rejects price %s with markup %s", (base, markup, message) => {
    expect(() => parsePricing(base, markup)).toThrow(PricingError);
    expect(() => parsePricing(base, markup)).toThrow(message);
  });
});

describe("the cost rule with every dimension", () => {
  const full = (settings: Partial<PriceSettings>): Price =>
    priceOf({ priceMicroPer1000Rows: 60n, markupPpm: 1_000_000n, ...settings });

  it("is the rows rule alone when no other dimension is set", () => {
    fc.assert(
      fc.property(fc.bigInt({ min: 0n, max: 10_000_000n }), priceArb, (rows, p) => {
        expect(statementCost({ rows, bytes: 12_345, ms: 999 }, p)).toBe(costOfRows(rows, p));
      }),
    );
  });

  it("matches worked examples", () => {
    // 0.06 USDC per 1000 rows, 0.01 per MB, 0.001 per second, markup 1.5, minimum 0.0001.
    const p = full({
      markupPpm: 1_500_000n,
      minimumMicroPerStatement: 100n,
      priceMicroPerMB: 10_000n,
      priceMicroPerSecond: 1_000n,
    });
    // 1 row of 40 bytes in 2 ms: 1.5 x (0.06 + 0.4 + 2) = 3.69 micro: the minimum, 100 micro, applies.
    expect(costBreakdown({ rows: 1, bytes: 40, ms: 2 }, p)).toEqual({
      rows: 1n,
      bytes: 40n,
      ms: 2n,
      rowsMicro: 1n,
      bytesMicro: 1n,
      timeMicro: 3n,
      minimumApplied: true,
      costMicro: 100n,
    });
    // 1000 rows, 2 500 000 bytes, 1 500 ms: 1.5 x (60 + 25 000 + 1 500) micro = 39 840 micro.
    expect(costBreakdown({ rows: 1000, bytes: 2_500_000, ms: 1500 }, p)).toMatchObject({
      rowsMicro: 90n,
      bytesMicro: 37_500n,
      timeMicro: 2_250n,
      minimumApplied: false,
      costMicro: 39_840n,
    });
    // The parts are exact and added before the one rounding: 3 rows at 0.000001 x 1.5 plus 1 byte.
    expect(
      statementCost(
        { rows: 3, bytes: 1 },
        full({ priceMicroPer1000Rows: 1n, markupPpm: 1_500_000n, priceMicroPerMB: 1n }),
      ),
    ).toBe(1n);
  });

  it("never charges less than the minimum, and never less when any usage grows", () => {
    const settingsArb = fc.record({
      priceMicroPer1000Rows: fc.bigInt({ min: 0n, max: 1_000_000_000n }),
      markupPpm: fc.bigInt({ min: 1_000_000n, max: 100_000_000n }),
      minimumMicroPerStatement: fc.bigInt({ min: 0n, max: 1_000_000n }),
      priceMicroPerMB: fc.bigInt({ min: 0n, max: 1_000_000_000n }),
      priceMicroPerSecond: fc.bigInt({ min: 0n, max: 1_000_000_000n }),
    });
    const usageArb = fc.record({
      rows: fc.integer({ min: 0, max: 1_000_000 }),
      bytes: fc.integer({ min: 0, max: 100_000_000 }),
      ms: fc.integer({ min: 0, max: 600_000 }),
    });
    fc.assert(
      fc.property(settingsArb, usageArb, usageArb, (settings, usage, more) => {
        const p = priceOf(settings);
        const cost = statementCost(usage, p);
        expect(cost >= settings.minimumMicroPerStatement).toBe(true);
        for (const grown of [
          { ...usage, rows: usage.rows + more.rows },
          { ...usage, bytes: usage.bytes + more.bytes },
          { ...usage, ms: usage.ms + more.ms },
        ])
          expect(statementCost(grown, p) >= cost).toBe(true);
      }),
    );
  });

  it("charges a statement's rows at the highest price among the relations it names", () => {
    const p = full({
      tablePricesMicroPer1000Rows: new Map([
        ["airports", 500n],
        ["sales.orders", 2000n],
        ["cheap", 1n],
      ]),
    });
    const rowPrice = (relations: string[] | undefined) =>
      priceForRelations(p, relations).picoUsdcPer1000Rows / 1_000_000n;
    expect(rowPrice([])).toBe(60n);
    expect(rowPrice(["routes"])).toBe(60n);
    expect(rowPrice(["airports"])).toBe(500n);
    expect(rowPrice(["public.airports"])).toBe(500n);
    expect(rowPrice(["airports", "routes"])).toBe(500n);
    expect(rowPrice(["cheap"])).toBe(1n);
    expect(rowPrice(["cheap", "routes"])).toBe(60n);
    expect(rowPrice(["orders"])).toBe(2000n); // unqualified: it may resolve to sales.orders
    expect(rowPrice(["public.orders"])).toBe(60n);
    expect(rowPrice(undefined)).toBe(2000n); // unknown (EXECUTE, FETCH): the highest price set
  });

  it("is free only when nothing is priced", () => {
    expect(isFree(full({ priceMicroPer1000Rows: 0n }))).toBe(true);
    expect(isFree(full({ priceMicroPer1000Rows: 0n, minimumMicroPerStatement: 1n }))).toBe(false);
    expect(isFree(full({ priceMicroPer1000Rows: 0n, priceMicroPerMB: 1n }))).toBe(false);
  });
});

describe("the price as agents read it", () => {
  it("is the rows price alone for a rows-only provider, every dimension otherwise, and reads back", () => {
    const rowsOnly = priceOf({ priceMicroPer1000Rows: 60_000n, markupPpm: 1_000_000n });
    expect(formatPrice(rowsOnly)).toBe("0.060000");
    const full = priceOf({
      priceMicroPer1000Rows: 50_000n,
      markupPpm: 1_200_000n,
      minimumMicroPerStatement: 500n,
      priceMicroPerMB: 2_000_000n,
      priceMicroPerSecond: 10_000n,
      tablePricesMicroPer1000Rows: new Map([
        ["orders", 5_000_000n],
        ['we"ird.t', 1n],
      ]),
    });
    const text = formatPrice(full);
    expect(text).toBe(
      '0.060000 per 1000 rows; minimum 0.000500 per statement; 2.400000 per MB; 0.012000 per second; table "orders" 6.000000 per 1000 rows; table "we\\"ird.t" 0.0000012 per 1000 rows',
    );
    expect(parsePrice(text)).toEqual(full);
    expect(parsePrice("0.060000")).toEqual(rowsOnly);
    for (const bad of ["", "x", "0.06 per 1000 rows; nonsense", "0.060000; 1.000000 per MB"])
      expect(parsePrice(bad)).toBeNull();
  });
});

describe("the time bound", () => {
  const timed = (settings: Partial<PriceSettings>): Price =>
    priceOf({
      priceMicroPer1000Rows: 1_000n,
      markupPpm: 1_000_000n,
      priceMicroPerSecond: 1_000_000n,
      ...settings,
    });

  it("is the most milliseconds the budget pays for, after the rows and bytes", () => {
    const price = timed({});
    expect(msAffordable(500_000n, { rows: 0 }, price)).toBe(500);
    expect(msAffordable(500_000n, { rows: 1000 }, price)).toBe(499);
    expect(msAffordable(999n, { rows: 0 }, price)).toBe(0);
    expect(msAffordable(500_000n, { rows: 10_000_000 }, price)).toBe(0);
  });

  it("pays no time under the minimum, and counts from zero above it", () => {
    const price = timed({ minimumMicroPerStatement: 10_000n });
    expect(msAffordable(9_999n, { rows: 0 }, price)).toBe(0);
    expect(msAffordable(10_000n, { rows: 0 }, price)).toBe(10);
  });

  it("is unbounded for a price without time", () => {
    expect(msAffordable(1n, { rows: 0 }, priceOf({ priceMicroPer1000Rows: 1n, markupPpm: 1_000_000n }))).toBe(
      Number.POSITIVE_INFINITY,
    );
  });

  it("never buys time the budget does not pay for, and leaves none of it unbought", () => {
    fc.assert(
      fc.property(
        fc.bigInt({ min: 0n, max: 10_000_000n }),
        fc.integer({ min: 0, max: 100_000 }),
        fc.integer({ min: 0, max: 10_000_000 }),
        fc.bigInt({ min: 1n, max: 5_000_000n }),
        fc.bigInt({ min: 0n, max: 50_000n }),
        (budget, rows, bytes, perSecond, minimum) => {
          const price = timed({
            priceMicroPerSecond: perSecond,
            priceMicroPerMB: 2_000n,
            minimumMicroPerStatement: minimum,
          });
          const ms = msAffordable(budget, { rows, bytes }, price);
          const cost = (at: number) => costBreakdown({ rows, bytes, ms: at }, price).costMicro;
          if (ms > 0 || cost(0) <= budget) expect(cost(ms)).toBeLessThanOrEqual(budget);
          if (cost(0) <= budget && budget >= minimum) expect(cost(ms + 1)).toBeGreaterThan(budget);
        },
      ),
    );
  });
});
