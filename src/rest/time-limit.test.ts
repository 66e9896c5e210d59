import { describe, expect, it } from "vitest";
import { priceOf } from "../billing/cost.js";
import { requestTimeBound, timeLimitError } from "./time-limit.js";

const price = priceOf({
  priceMicroPer1000Rows: 1_000n,
  markupPpm: 1_000_000n,
  priceMicroPerSecond: 1_000_000n,
});

describe("a REST request's time bound", () => {
  it("is what the held funds buy when they are less than maxCost", () => {
    const bound = requestTimeBound(500_000n, { rows: 1 }, price, 800_000n);
    expect(bound).toMatchObject({ by: "funds", limit: { leftMs: 499, usedMs: 0, reached: false } });
  });

  it("is maxCost's when the funds held reach it", () => {
    expect(requestTimeBound(200_000n, { rows: 1 }, price, 200_000n)).toMatchObject({
      by: "max-cost",
      limit: { leftMs: 199 },
    });
  });

  it("answers 402 for the balance and 422 budget_exceeded for maxCost or the daily limit", () => {
    expect(timeLimitError("funds", 480, 480_000n, undefined, null)).toMatchObject({ statusCode: 402 });
    expect(timeLimitError("max-cost", 199, 199_000n, 200_000n, null)).toMatchObject({
      statusCode: 422,
      sqlState: "budget_exceeded",
    });
    const daily = {
      dailyLimitMicro: 400_000n,
      spentTodayMicro: 0n,
      remainingTodayMicro: 0n,
      resetsAt: new Date(),
    };
    const error = timeLimitError("funds", 399, 399_000n, undefined, daily);
    expect(error).toMatchObject({ statusCode: 422, sqlState: "budget_exceeded" });
    expect(error.message).toMatch(/daily limit/);
  });
});
