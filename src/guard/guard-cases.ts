import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

/** One line of the guard contract: a statement and the verdict the standard policy must give it. */
export interface GuardCase {
  verdict: "allow" | "deny" | "invalid";
  sql: string;
}

/**
 * The project's copy of the guard contract (test data kept in the repository, so a clone runs its tests with
 * nothing beside it). The contract's source may hold cases the copy must also hold: guard-cases.test.ts checks
 * that when the source is present.
 */
export const projectGuardCasesFile = fileURLToPath(new URL("./cases.jsonl", import.meta.url));

/**
 * Cases of the contract's source that the project's copy deliberately gives another verdict, each with why.
 * The coverage test accepts exactly these differences, and checks the copy holds each with its new verdict.
 */
export const SUPERSEDED_CASES: readonly (GuardCase & { reason: string })[] = [
  {
    sql: "SELECT * FROM items FOR UPDATE",
    verdict: "deny",
    reason: "row locks block the provider's own application (rule no-row-lock)",
  },
  {
    sql: "WITH d AS (DELETE FROM items WHERE id = 3 RETURNING *) SELECT * FROM d",
    verdict: "deny",
    reason:
      "PostgreSQL does not report the rows a data-modifying CTE writes, so they could not be charged (rule no-data-modifying-cte)",
  },
];

/** Parses a cases file: one `{"verdict", "sql"}` object a line; a malformed line is an error naming it. */
export function parseGuardCases(text: string, file: string): GuardCase[] {
  return text
    .split("\n")
    .filter((line) => line.trim() !== "")
    .map((line, i) => {
      const parsed = JSON.parse(line) as GuardCase;
      if (!["allow", "deny", "invalid"].includes(parsed.verdict) || typeof parsed.sql !== "string") {
        throw new Error(`guard contract: ${file} line ${i + 1} is malformed: ${line}`);
      }
      return parsed;
    });
}

/** Reads the project's copy of the contract; PGTOLL_GUARD_CASES names another file instead. */
export function readGuardCases(file = process.env.PGTOLL_GUARD_CASES ?? projectGuardCasesFile): GuardCase[] {
  return parseGuardCases(readFileSync(file, "utf8"), file);
}
