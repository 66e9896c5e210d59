import { beforeAll, describe, expect, it } from "vitest";
import { readGuardCases } from "./guard-cases.js";
import { checkSql, loadGuard } from "./index.js";

const cases = readGuardCases();

beforeAll(() => loadGuard());

describe("guard contract (src/guard/cases.jsonl)", () => {
  it("has cases of every verdict", () => {
    const verdicts = new Set(cases.map((c) => c.verdict));
    expect([...verdicts].sort()).toEqual(["allow", "deny", "invalid"]);
  });

  it.each(cases.map((c) => [c.verdict, c.sql] as const))("%s: %s", (verdict, sql) => {
    const result = checkSql(sql);
    expect(result.kind, JSON.stringify(result)).toBe(verdict);
    if (result.kind === "allow") expect(result.statements.length).toBeGreaterThan(0);
    if (result.kind === "deny") expect(result.rule).toMatch(/^[a-z-]+$/);
  });
});
