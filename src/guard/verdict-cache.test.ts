import { beforeAll, describe, expect, it } from "vitest";
import { guardCasePolicy, readGuardCases } from "./guard-cases.js";
import { checkSql, type GuardVerdict, loadGuard, maskLiterals } from "./index.js";
import { createVerdictCache, withReadOnlyVerdicts } from "./verdict-cache.js";

const cases = readGuardCases();

const INTEGERS = ["0", "7", "000", "999999999"];
const STRINGS = [
  "''",
  "'x'",
  "'it''s'",
  "'; DROP TABLE t; --'",
  "'ü/* '",
  "'\\'",
  "'$$'",
  "'sjis'",
  "'utf8'",
];

/** The verdict without the shape that an answer from a learned shape carries (the guard's own has none). */
function unshaped(verdict: GuardVerdict): GuardVerdict {
  if (verdict.kind !== "allow") return verdict;
  return { ...verdict, statements: verdict.statements.map(({ shape: _, ...statement }) => statement) };
}

/** `sql` with each masked literal in turn, then all of them, replaced by other values of its kind. */
function variants(sql: string): string[] {
  const mask = maskLiterals(sql);
  if (!mask) return [];
  const { spans } = mask;
  const kindOf = (k: number) => (sql[spans[k]!] === "'" ? STRINGS : INTEGERS);
  const replace = (values: (string | undefined)[]) => {
    let out = "";
    let at = 0;
    for (let k = 0; k < spans.length; k += 2) {
      out += sql.slice(at, spans[k]) + (values[k / 2] ?? sql.slice(spans[k], spans[k + 1]));
      at = spans[k + 1]!;
    }
    return out + sql.slice(at);
  };
  const out: string[] = [];
  for (let k = 0; k < spans.length; k += 2) {
    for (const value of kindOf(k)) {
      const values: (string | undefined)[] = [];
      values[k / 2] = value;
      out.push(replace(values));
    }
  }
  for (let v = 0; v < STRINGS.length; v++) {
    const values: string[] = [];
    for (let k = 0; k < spans.length; k += 2) values.push(kindOf(k)[v % kindOf(k).length]!);
    out.push(replace(values));
  }
  return out;
}

beforeAll(() => loadGuard());

describe("createVerdictCache", () => {
  it("gives every contract case the guard's own verdict, cold, warm and in any order", () => {
    for (const order of [cases, [...cases].reverse()]) {
      const check = createVerdictCache();
      for (const pass of [1, 2]) {
        for (const { sql } of order)
          expect(unshaped(check(sql)), `pass ${pass}: ${sql}`).toEqual(checkSql(sql));
      }
    }
  });

  it("gives every contract case with other literal values the guard's own verdict", () => {
    let compared = 0;
    for (const c of cases) {
      const policy = guardCasePolicy(c);
      const check = createVerdictCache(policy);
      check(c.sql);
      for (const variant of variants(c.sql)) {
        expect(unshaped(check(variant)), variant).toEqual(checkSql(variant, policy));
        compared++;
      }
    }
    expect(compared).toBeGreaterThan(500);
  });

  it("answers pgbench's select from the shape it learned, with the statement's own text", () => {
    const check = createVerdictCache();
    const sql = (aid: number) => `SELECT abalance FROM pgbench_accounts WHERE aid = ${aid};`;
    check(sql(1));
    for (const aid of [2, 77, 123456]) {
      expect(check(sql(aid))).toEqual({
        kind: "allow",
        statements: [
          {
            sql: `SELECT abalance FROM pgbench_accounts WHERE aid = ${aid}`,
            command: "SELECT",
            explainable: true,
            returnsRows: true,
            transactionControl: false,
            writes: false,
            relations: ["pgbench_accounts"],
            shape: expect.any(String),
          },
        ],
      });
    }
  });

  it("names one shape for texts that differ only in literals, holding none of their values", () => {
    const check = createVerdictCache();
    const shapeOf = (sql: string) => {
      const verdict = check(sql);
      return verdict.kind === "allow" ? verdict.statements.map((s) => s.shape) : [];
    };
    const sql = (aid: number, name: string) =>
      `SELECT abalance FROM pgbench_accounts WHERE aid = ${aid}; SELECT 1 FROM items WHERE name = '${name}'`;
    expect(shapeOf(sql(1, "first"))).toEqual([undefined, undefined]);
    const [point, byName] = shapeOf(sql(424242, "secret-value"));
    expect(point).toEqual(expect.any(String));
    expect(byName).toEqual(expect.any(String));
    expect(point).not.toBe(byName);
    expect(shapeOf(sql(99, "other"))).toEqual([point, byName]);
    for (const shape of [point!, byName!])
      for (const value of ["424242", "secret-value", "first", "99", "other"])
        expect(shape).not.toContain(value);
    expect(shapeOf("SELECT abalance FROM pgbench_accounts WHERE aid = 7")).not.toContain(point);
  });
});

describe("withReadOnlyVerdicts", () => {
  it("keeps the guard's verdicts and denies what would make a read-only session read-write", () => {
    const check = withReadOnlyVerdicts(createVerdictCache());
    for (const sql of ["SELECT 1", "INSERT INTO items (name) VALUES ('x')", "DROP TABLE items", "SELEC 1"])
      expect(unshaped(check(sql)), sql).toEqual(checkSql(sql));
    for (const sql of [
      "BEGIN READ WRITE",
      "SET transaction_read_only = off",
      "SET transaction_read_only = 'off'",
      "SET SESSION CHARACTERISTICS AS TRANSACTION READ WRITE",
      "SELECT 1; START TRANSACTION ISOLATION LEVEL SERIALIZABLE, READ WRITE",
    ]) {
      for (const pass of [1, 2])
        expect(check(sql), `pass ${pass}: ${sql}`).toMatchObject({ kind: "deny", rule: "read-only-session" });
    }
    // The same shape as a denied text, with another literal: not answered from the guard's shapes.
    expect(check("SET transaction_read_only = 'on'").kind).toBe("allow");
  });

  it("remembers short texts only, so that long ones cannot fill memory", () => {
    let calls = 0;
    const allow: GuardVerdict = { kind: "allow", statements: [] };
    const check = withReadOnlyVerdicts(() => {
      calls++;
      return allow;
    });
    check("SELECT 1");
    check("SELECT 1");
    expect(calls).toBe(1);
    const long = `SELECT '${"x".repeat(10_000)}'`;
    check(long);
    check(long);
    expect(calls).toBe(3);
  });
});
