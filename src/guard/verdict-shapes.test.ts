import { beforeAll, describe, expect, it } from "vitest";
import { checkSql, loadGuard, maskLiterals, VerdictShapes } from "./index.js";

/** A VerdictShapes that learned from `taught`; `answer(sql)` is its verdict for `sql` (undefined: none). */
function learnedFrom(taught: string) {
  const shapes = new VerdictShapes();
  const mask = maskLiterals(taught);
  if (!mask) throw new Error(`nothing to mask in ${taught}`);
  shapes.learn(taught, mask, checkSql(taught));
  return (sql: string) => {
    const other = maskLiterals(sql);
    expect(other?.key, "same mask").toBe(mask.key);
    return shapes.lookup(sql, other!);
  };
}

beforeAll(() => loadGuard());

describe("VerdictShapes", () => {
  it("slices each statement from the text asked about, whatever its literals' lengths", () => {
    const answer = learnedFrom("/* c */ SELECT 'é', 1; -- x\n  SELECT 'a''b', 2 ; SELECT 3");
    const sql = "/* c */ SELECT 'ééé€𝄞', 100; -- x\n  SELECT '', 2222 ; SELECT 333333";
    const answered = answer(sql);
    expect(answered?.kind === "allow" && answered.statements.every((s) => typeof s.shape === "string")).toBe(
      true,
    );
    expect(
      answered?.kind === "allow" && {
        ...answered,
        statements: answered.statements.map(({ shape: _, ...statement }) => statement),
      },
    ).toEqual(checkSql(sql));
    expect(answer(sql)).toMatchObject({
      statements: [{ sql: "SELECT 'ééé€𝄞', 100" }, { sql: "SELECT '', 2222" }, { sql: "SELECT 333333" }],
    });
  });

  it("learns nothing where the policy reads a value: SET client_encoding", () => {
    const answer = learnedFrom("SET client_encoding = 'UTF8'");
    expect(answer("SET client_encoding = 'SJIS'")).toBeUndefined();
    expect(checkSql("SET client_encoding = 'SJIS'").kind).toBe("deny");
  });

  it("learns nothing where a literal is not a constant of its own (the grammar may judge its value)", () => {
    for (const [taught, other] of [
      ["SELECT 1::float(5)", "SELECT 1::float(0)"], // opt_float checks the precision
      ["DECLARE c CURSOR FOR SELECT 1; FETCH 5 FROM c", "DECLARE c CURSOR FOR SELECT 1; FETCH 6 FROM c"],
      ["SELECT - 1", "SELECT - 2"], // the constant is located at the minus sign
      ["SELECT U&\"d\" UESCAPE '!' FROM t", "SELECT U&\"d\" UESCAPE 'x' FROM t"], // not a constant at all
      ["COPY t TO 'a'", "COPY t TO 'b'"], // denied, and a file name rather than a constant
    ] as const) {
      expect(learnedFrom(taught)(other), other).toBeUndefined();
    }
    expect(checkSql("SELECT 1::float(0)").kind).toBe("invalid");
  });

  it("leaves text the server would read differently to the guard", () => {
    const answer = learnedFrom("SELECT 'a'");
    expect(answer("SELECT '\ud800'")).toBeUndefined();
    expect(checkSql("SELECT '\ud800'").kind).toBe("invalid");
  });

  it("starts over when full", () => {
    const shapes = new VerdictShapes(2);
    for (const sql of ["SELECT 1", "SELECT 1, 2", "SELECT 1, 2, 3"])
      shapes.learn(sql, maskLiterals(sql)!, checkSql(sql));
    expect(shapes.size).toBe(1);
  });
});
