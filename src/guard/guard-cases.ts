import { existsSync, readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

/** One line of the shared guard contract (`shared/guard/cases.jsonl`). */
export interface GuardCase {
  verdict: "allow" | "deny" | "invalid";
  sql: string;
}

/** The repository root: the nearest ancestor of this file holding a package.json. */
function repoRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  while (!existsSync(join(dir, "package.json"))) {
    const parent = dirname(dir);
    if (parent === dir) throw new Error("guard contract: no package.json above the test file");
    dir = parent;
  }
  return dir;
}

/** Reads the contract: `shared/` is the repository's sibling; PGTOLL_GUARD_CASES overrides the path. */
export function readGuardCases(): GuardCase[] {
  const file = process.env.PGTOLL_GUARD_CASES ?? resolve(repoRoot(), "../shared/guard/cases.jsonl");
  if (!existsSync(file)) throw new Error(`guard contract: ${file} is missing`);
  return readFileSync(file, "utf8")
    .split("\n")
    .filter((line) => line.trim() !== "")
    .map((line, i) => {
      const parsed = JSON.parse(line) as GuardCase;
      if (!["allow", "deny", "invalid"].includes(parsed.verdict) || typeof parsed.sql !== "string") {
        throw new Error(`guard contract: line ${i + 1} is malformed: ${line}`);
      }
      return parsed;
    });
}
