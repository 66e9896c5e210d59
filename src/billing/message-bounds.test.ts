import { describe, expect, it } from "vitest";
import { boundText, DATABASE_TEXT_LIMIT } from "./message-bounds.js";

describe("boundText", () => {
  it("keeps short text as it is", () => {
    expect(boundText("division by zero")).toBe("division by zero");
    expect(boundText("é".repeat(128))).toBe("é".repeat(128)); // 256 bytes exactly
  });

  it("cuts long text to the byte limit with an ellipsis, never inside a character", () => {
    const cut = boundText(`invalid input syntax for type integer: "${"x".repeat(500_000)}"`);
    expect(Buffer.byteLength(cut)).toBeLessThanOrEqual(DATABASE_TEXT_LIMIT);
    expect(cut.endsWith("…")).toBe(true);
    for (const text of ["é".repeat(200), "日本".repeat(100), "😀".repeat(100)]) {
      const bounded = boundText(text, 100);
      expect(Buffer.byteLength(bounded)).toBeLessThanOrEqual(100);
      expect(bounded).not.toContain("\ufffd");
      expect(text.startsWith(bounded.slice(0, -1))).toBe(true);
    }
  });
});
