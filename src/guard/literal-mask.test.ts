import { describe, expect, it } from "vitest";
import { maskLiterals } from "./literal-mask.js";

/** The masked literals of `sql`, as text. */
function literals(sql: string): string[] | null {
  const mask = maskLiterals(sql);
  if (!mask) return null;
  const out: string[] = [];
  for (let k = 0; k < mask.spans.length; k += 2) out.push(sql.slice(mask.spans[k], mask.spans[k + 1]));
  return out;
}

describe("maskLiterals", () => {
  it("masks small integers and plain strings, keeping everything else verbatim", () => {
    expect(maskLiterals("SELECT abalance FROM pgbench_accounts WHERE aid = 12345;")).toEqual({
      key: "SELECT abalance FROM pgbench_accounts WHERE aid = \0i;",
      spans: [50, 55],
    });
    expect(literals("INSERT INTO t VALUES (1, 'it''s', 'a\\b', 'ü')")).toEqual([
      "1",
      "'it''s'",
      "'a\\b'",
      "'ü'",
    ]);
    expect(maskLiterals("SELECT 1")?.key).toBe(maskLiterals("SELECT 999999999")?.key);
    expect(maskLiterals("SELECT 'a'")?.key).not.toBe(maskLiterals("SELECT 1")?.key);
    expect(maskLiterals("SELECT 1")?.key).not.toBe(maskLiterals("select 1")?.key);
  });

  it("keeps literals that are not one ICONST or plain SCONST token verbatim", () => {
    expect(literals("SELECT 1234567890, 1.5, .5, 1e5, 0x1F, 1_000, 12abc, 5")).toEqual(["5"]);
    expect(literals("SELECT t1.c2, $1, $23, x1 FROM t1 WHERE a = 3")).toEqual(["3"]);
    expect(literals('SELECT "col 1", "a""b" FROM "t\'x" WHERE a = \'1\'')).toEqual(["'1'"]);
  });

  it("skips comments, nested block comments included", () => {
    expect(literals("/* 'x' /* 2 */ 3 */ SELECT 4 -- 'y' 5\n, 6")).toEqual(["4", "6"]);
    expect(literals("SELECT 1 --")).toEqual(["1"]);
  });

  it("gives up on what it does not model", () => {
    for (const sql of [
      "SELECT E'a\\'b', 1", // escape string
      "SELECT e'x', 1",
      "SELECT B'101', 1",
      "SELECT X'1F', 1",
      "SELECT N'x', 1",
      "SELECT U&'d\\0061t', 1",
      "SELECT 1 &'x'",
      "SELECT $$it's$$, 1",
      "SELECT $tag$x$tag$, 1",
      "SELECT 'a'\n'b', 1", // one SCONST continued on the next line
      "SELECT 'a' -- c\n'b', 1",
      "SELECT 'a' - 1",
      "SELECT 'a' 'b'",
      "SELECT 'unterminated",
      'SELECT "unterminated',
      "SELECT 1 /* unterminated",
      "SELECT 1 /* a /* b */",
      "SELECT 1, 'a\0b'",
      "SELECT 1 -- \0",
      "SELECT 1\0",
      `SELECT '${"x".repeat(9000)}'`,
    ]) {
      expect(maskLiterals(sql), sql).toBeNull();
    }
  });

  it("is null when nothing is masked", () => {
    expect(maskLiterals("SELECT now()")).toBeNull();
    expect(maskLiterals("")).toBeNull();
  });
});
