import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { standardPolicy } from "./standard-policy.js";
import type { GuardPolicy } from "./types.js";

/**
 * One line of the guard contract: a statement and the verdict the standard policy must give it, for a provider
 * that prices `pricedTables` (`table` or `schema.table`, as in its `tablePrices`) and allows row folding or not
 * when they are given.
 */
export interface GuardCase {
  verdict: "allow" | "deny" | "invalid";
  sql: string;
  /** The rule a denial must name. */
  rule?: string;
  /** Tables the provider prices: the case holds for a provider with these table prices. */
  pricedTables?: string[];
  /** With `pricedTables`: the provider's `allowRowFolding`. */
  allowRowFolding?: boolean;
}

/** The policy a case is judged under: `base` with the case's priced tables and allowance. */
export function guardCasePolicy(c: GuardCase, base: GuardPolicy = standardPolicy): GuardPolicy {
  if (!c.pricedTables) return base;
  return {
    ...base,
    tablePrices: new Map(c.pricedTables.map((name) => [name, 1_000_000n])),
    allowRowFolding: c.allowRowFolding === true,
  };
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

/**
 * Parses a cases file: one `{"verdict", "sql"}` object a line, with `rule`, `pricedTables` and `allowRowFolding`
 * when the case needs them; a malformed line is an error naming it.
 */
export function parseGuardCases(text: string, file: string): GuardCase[] {
  return text
    .split("\n")
    .filter((line) => line.trim() !== "")
    .map((line, i) => {
      const parsed = JSON.parse(line) as GuardCase;
      const tables = parsed.pricedTables;
      if (
        !["allow", "deny", "invalid"].includes(parsed.verdict) ||
        typeof parsed.sql !== "string" ||
        (parsed.rule !== undefined && typeof parsed.rule !== "string") ||
        (tables !== undefined && !(Array.isArray(tables) && tables.every((t) => typeof t === "string"))) ||
        (parsed.allowRowFolding !== undefined && typeof parsed.allowRowFolding !== "boolean")
      ) {
        throw new Error(`guard contract: ${file} line ${i + 1} is malformed: ${line}`);
      }
      return parsed;
    });
}

/** Reads the project's copy of the contract; PGTOLL_GUARD_CASES names another file instead. */
export function readGuardCases(file = process.env.PGTOLL_GUARD_CASES ?? projectGuardCasesFile): GuardCase[] {
  return parseGuardCases(readFileSync(file, "utf8"), file);
}
