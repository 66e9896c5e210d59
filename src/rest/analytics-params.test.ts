import { describe, expect, it } from "vitest";
import { rangeParams } from "./analytics-params.js";
import { HttpError } from "./plugins/errors.js";

function refusal(query: { from?: string; to?: string }): { status: number; message: string } {
  try {
    rangeParams(query, new Date("2026-06-01T00:00:00Z"));
  } catch (error) {
    if (error instanceof HttpError) return { status: error.statusCode, message: error.message };
    throw error;
  }
  throw new Error(`accepted ${JSON.stringify(query)}`);
}

describe("rangeParams", () => {
  it.each([
    ["from", "2026-02-30"],
    ["from", "2026-02-29"],
    ["to", "2026-04-31"],
    ["from", "2026-00-10"],
    ["to", "2026-13-01"],
    ["from", "2026-05-00"],
    ["to", "2026-05-10T24:00Z"],
    ["from", "2026-05-10T23:60:00Z"],
    ["from", "2026-05-10T12:00:60Z"],
    ["to", "2026-05-10T12:00+24:00"],
  ])("refuses the impossible %s=%s with 400 naming the parameter", (name, value) => {
    const { status, message } = refusal({ [name]: value });
    expect(status).toBe(400);
    expect(message).toBe(`invalid ${name}: ${value} is not a real date and time`);
  });

  it("takes real dates, leap days and zones as written", () => {
    expect(rangeParams({ from: "2024-02-29", to: "2024-03-01" })).toEqual({
      from: new Date("2024-02-29T00:00:00Z"),
      to: new Date("2024-03-01T00:00:00Z"),
    });
    expect(rangeParams({ from: "2026-05-31T23:59:59.5+02:00", to: "2026-06-01T00:00Z" }).from).toEqual(
      new Date("2026-05-31T21:59:59.500Z"),
    );
  });

  it("still refuses what is not an ISO date at all", () => {
    expect(refusal({ from: "yesterday" }).message).toMatch(/^invalid from: expected an ISO 8601 date/);
  });
});
