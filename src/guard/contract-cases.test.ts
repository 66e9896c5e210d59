import { beforeAll, describe, expect, it } from "vitest";
import { guardCasePolicy, readGuardCases } from "./guard-cases.js";
import { checkSql, loadGuard } from "./index.js";

const cases = readGuardCases();

beforeAll(() => loadGuard());

describe("guard contract (src/guard/cases.jsonl)", () => {
  it("has cases of every verdict", () => {
    const verdicts = new Set(cases.map((c) => c.verdict));
    expect([...verdicts].sort()).toEqual(["allow", "deny", "invalid"]);
  });

  it.each(cases.map((c) => [c.verdict, c.sql, c] as const))("%s: %s", (verdict, sql, c) => {
    const result = checkSql(sql, guardCasePolicy(c));
    expect(result.kind, JSON.stringify(result)).toBe(verdict);
    if (result.kind === "allow") expect(result.statements.length).toBeGreaterThan(0);
    if (result.kind === "deny") expect(result.rule).toMatch(c.rule === undefined ? /^[a-z-]+$/ : c.rule);
  });
});
