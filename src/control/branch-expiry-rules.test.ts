import { describe, expect, it } from "vitest";
import { MAX_EXPIRY_MS, parseExpiresAt, parseRfc3339 } from "./branch-expiry-rules.js";

describe("parseRfc3339", () => {
  it("reads UTC and offset timestamps, with or without a fraction", () => {
    expect(parseRfc3339("2025-07-15T18:02:16Z")?.toISOString()).toBe("2025-07-15T18:02:16.000Z");
    expect(parseRfc3339("2025-07-15T18:02:16-05:00")?.toISOString()).toBe("2025-07-15T23:02:16.000Z");
    expect(parseRfc3339("2025-07-15T18:02:16+09:30")?.toISOString()).toBe("2025-07-15T08:32:16.000Z");
    expect(parseRfc3339("2025-07-15t18:02:16.123456z")?.toISOString()).toBe("2025-07-15T18:02:16.000Z");
    expect(parseRfc3339("2024-02-29T00:00:00Z")?.toISOString()).toBe("2024-02-29T00:00:00.000Z");
  });

  it("refuses what is not RFC 3339 or names a day or time that does not exist", () => {
    for (const value of [
      "2025-07-15T18:02:16", // no time zone
      "2025-07-15T18:02:16Z-05:00",
      "2025-07-15 18:02:16Z",
      "2025-07-15",
      "tomorrow",
      "1752602536",
      "2025-02-29T00:00:00Z",
      "2025-04-31T00:00:00Z",
      "2025-13-01T00:00:00Z",
      "2025-07-15T24:00:00Z",
      "2025-07-15T18:60:00Z",
      "2025-07-15T18:02:60Z",
      "2025-07-15T18:02:16+24:00",
    ])
      expect(parseRfc3339(value), value).toBeNull();
  });
});

describe("parseExpiresAt", () => {
  const now = Date.parse("2025-07-15T12:00:00Z");

  it("leaves undefined (no change) and null (no expiry) as they are, and keeps whole seconds", () => {
    expect(parseExpiresAt(undefined, now)).toBeUndefined();
    expect(parseExpiresAt(null, now)).toBeNull();
    expect(parseExpiresAt("2025-07-15T13:00:00.999Z", now)?.toISOString()).toBe("2025-07-15T13:00:00.000Z");
  });

  it("answers 400 {code, message} for a malformed, past or too distant timestamp", () => {
    const refusal = (value: string) => {
      try {
        parseExpiresAt(value, now);
      } catch (error) {
        return error;
      }
      throw new Error(`${value} was accepted`);
    };
    expect(refusal("2025-07-16")).toMatchObject({ statusCode: 400, code: "BAD_REQUEST" });
    expect(refusal("2025-07-16")).toHaveProperty("message", expect.stringMatching(/RFC 3339/));
    expect(refusal("2025-07-15T12:00:00Z")).toHaveProperty("message", expect.stringMatching(/future/));
    expect(refusal("2025-07-15T12:00:00.500Z")).toHaveProperty("message", expect.stringMatching(/future/));
    expect(refusal(new Date(now + MAX_EXPIRY_MS + 1000).toISOString())).toHaveProperty(
      "message",
      expect.stringMatching(/30 days/),
    );
    expect(parseExpiresAt(new Date(now + MAX_EXPIRY_MS).toISOString(), now)?.getTime()).toBe(
      now + MAX_EXPIRY_MS,
    );
  });
});
