import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { parseGuardCases, projectGuardCasesFile, readGuardCases, SUPERSEDED_CASES } from "./guard-cases.js";

/** Where the contract's source sits when the repository is checked out beside it. */
const sourceFile = fileURLToPath(new URL("../../../shared/guard/cases.jsonl", import.meta.url));

describe("the project's copy of the guard contract", () => {
  it("is read from inside the repository", () => {
    expect(projectGuardCasesFile.startsWith(fileURLToPath(new URL("../..", import.meta.url)))).toBe(true);
    expect(readGuardCases(projectGuardCasesFile).length).toBeGreaterThan(100);
  });

  it("names a malformed line", () => {
    expect(() =>
      parseGuardCases('{"verdict":"allow","sql":"SELECT 1"}\n{"verdict":"maybe","sql":"x"}', "f"),
    ).toThrow(/f line 2 is malformed/);
  });

  it.skipIf(!existsSync(sourceFile))(
    "covers every case of the contract's source beside the project, same verdict unless superseded",
    () => {
      const copy = new Map(readGuardCases(projectGuardCasesFile).map((c) => [c.sql, c.verdict]));
      const superseded = new Map(SUPERSEDED_CASES.map((c) => [c.sql, c.verdict]));
      const missing = readGuardCases(sourceFile).filter(
        (c) => copy.get(c.sql) !== (superseded.get(c.sql) ?? c.verdict),
      );
      expect(
        missing,
        "cases of ../shared/guard/cases.jsonl missing from src/guard/cases.jsonl or with another verdict",
      ).toEqual([]);
    },
  );

  it("holds each case it supersedes with its new verdict", () => {
    const copy = new Map(readGuardCases(projectGuardCasesFile).map((c) => [c.sql, c.verdict]));
    for (const c of SUPERSEDED_CASES) expect(copy.get(c.sql), c.sql).toBe(c.verdict);
  });
});
