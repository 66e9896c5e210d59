import { beforeAll, describe, expect, it } from "vitest";
import { shapeText } from "../analytics/shape-text.js";
import { loadGuard } from "./index.js";
import { cutForDisplay, MAX_SHAPE_TEXT, normalizedShapeText } from "./statement-shape.js";

beforeAll(() => loadGuard());

/** A statement longer than a sample whose 200-character cut falls inside its string literal. */
const LONG = `SELECT name FROM items WHERE category = 'foreign trade ${"and more ".repeat(30)}' AND id > 10 ORDER BY name`;

describe("statement shape text", () => {
  it("normalises the whole statement, then cuts it", () => {
    expect(LONG.length).toBeGreaterThan(MAX_SHAPE_TEXT);
    expect(normalizedShapeText(LONG)).toBe(
      "SELECT name FROM items WHERE category = $1 AND id > $2 ORDER BY name",
    );
    const wide = `SELECT ${Array.from({ length: 60 }, (_, i) => `c${i}`).join(", ")} FROM t WHERE a = 'x'`;
    const cut = normalizedShapeText(wide);
    expect(cut).toHaveLength(MAX_SHAPE_TEXT);
    expect(cut?.endsWith("…")).toBe(true);
    expect(cut).not.toContain("'x'");
  });

  it("has no shape for a text cut inside a literal, where the normaliser answers with the parser's message", () => {
    const sample = cutForDisplay(LONG);
    expect(sample).toMatch(/'foreign trade and more/);
    expect(normalizedShapeText(sample)).toBeUndefined();
    expect(normalizedShapeText("SELEC 1")).toBeUndefined();
  });

  it("shows the cut statement, never a parser's message, when the text cannot be normalised", () => {
    const sample = cutForDisplay(LONG);
    expect(shapeText(sample)).toBe(sample);
    expect(shapeText(sample)).not.toMatch(/unterminated|syntax error/);
    expect(shapeText(LONG)).toBe("SELECT name FROM items WHERE category = $1 AND id > $2 ORDER BY name");
    expect(shapeText("SELECT $1 FROM t")).toBe("SELECT $1 FROM t");
  });
});
