import { beforeAll, describe, expect, it } from "vitest";
import type { GuardedStatement } from "./index.js";
import { checkSql, loadGuard, standardPolicy } from "./index.js";

beforeAll(() => loadGuard());

function statementsOf(sql: string): GuardedStatement[] {
  const verdict = checkSql(sql);
  if (verdict.kind !== "allow") throw new Error(`expected allow for ${sql}: ${JSON.stringify(verdict)}`);
  return verdict.statements;
}

function only(sql: string): Omit<GuardedStatement, "sql" | "relations"> {
  const [statement, ...rest] = statementsOf(sql);
  expect(rest).toEqual([]);
  const { sql: _text, relations: _relations, ...metadata } = statement!;
  return metadata;
}

const row = { explainable: false, returnsRows: true, transactionControl: false, writes: false };
const plain = { explainable: false, returnsRows: false, transactionControl: false, writes: false };
const tx = { explainable: false, returnsRows: false, transactionControl: true, writes: false };

describe("GuardedStatement metadata", () => {
  it.each([
    ["SELECT 1", { command: "SELECT", ...row, explainable: true }],
    ["VALUES (1)", { command: "SELECT", ...row, explainable: true }],
    ["TABLE items", { command: "SELECT", ...row, explainable: true }],
    [
      "INSERT INTO items (name) VALUES ('a')",
      { command: "INSERT", ...plain, explainable: true, writes: true },
    ],
    [
      "INSERT INTO items (name) VALUES ('a') RETURNING id",
      { command: "INSERT", ...row, explainable: true, writes: true },
    ],
    [
      "UPDATE items SET name = 'b' WHERE id = 3",
      { command: "UPDATE", ...plain, explainable: true, writes: true },
    ],
    [
      "DELETE FROM items WHERE id = 3 RETURNING *",
      { command: "DELETE", ...row, explainable: true, writes: true },
    ],
    ["EXPLAIN SELECT 1", { command: "EXPLAIN", ...row }],
    ["SHOW search_path", { command: "SHOW", ...row }],
    ["SET application_name = 'a'", { command: "SET", ...plain }],
    ["RESET application_name", { command: "RESET", ...plain }],
    ["BEGIN", { command: "BEGIN", ...tx }],
    ["START TRANSACTION", { command: "START TRANSACTION", ...tx }],
    ["END", { command: "COMMIT", ...tx }],
    ["ABORT", { command: "ROLLBACK", ...tx }],
    ["SAVEPOINT s", { command: "SAVEPOINT", ...tx }],
    ["RELEASE s", { command: "RELEASE", ...tx }],
    ["ROLLBACK TO s", { command: "ROLLBACK", ...tx }],
    ["PREPARE q AS SELECT 1", { command: "PREPARE", ...plain }],
    ["EXECUTE q", { command: "EXECUTE", ...row, explainable: true, writes: true }],
    ["DEALLOCATE q", { command: "DEALLOCATE", ...plain }],
    ["DEALLOCATE ALL", { command: "DEALLOCATE ALL", ...plain }],
    ["DECLARE c CURSOR FOR SELECT 1", { command: "DECLARE CURSOR", ...plain, explainable: true }],
    ["FETCH 10 FROM c", { command: "FETCH", ...row }],
    ["MOVE 10 IN c", { command: "MOVE", ...plain }],
    ["CLOSE c", { command: "CLOSE CURSOR", ...plain }],
    ["COPY items TO STDOUT", { command: "COPY", ...row }],
    ["COPY items TO STDOUT (FORMAT csv, HEADER)", { command: "COPY", ...row, copyHeader: true }],
    ["COPY items TO STDOUT WITH CSV HEADER", { command: "COPY", ...row, copyHeader: true }],
    ["COPY items TO STDOUT (HEADER off)", { command: "COPY", ...row }],
    ["COPY items TO STDOUT (FORMAT binary)", { command: "COPY", ...row }],
  ])("%s", (sql, expected) => {
    expect(only(sql)).toEqual(expected);
  });

  it("slices each statement of a multi-statement string, trimmed, without its leading comment", () => {
    const statements = statementsOf(
      "  BEGIN;\n  SELECT 'a;b' AS x ; -- note\n UPDATE items SET name = 'é' WHERE id = 1;COMMIT  ",
    );
    expect(statements.map((s) => s.sql)).toEqual([
      "BEGIN",
      "SELECT 'a;b' AS x",
      "UPDATE items SET name = 'é' WHERE id = 1",
      "COMMIT",
    ]);
    expect(statements.map((s) => s.command)).toEqual(["BEGIN", "SELECT", "UPDATE", "COMMIT"]);
  });

  it("slices by the parser's byte offsets when the text is not ASCII", () => {
    const statements = statementsOf("select 'ü€😀' as a; select '→' as b;select 3");
    expect(statements.map((s) => s.sql)).toEqual(["select 'ü€😀' as a", "select '→' as b", "select 3"]);
  });

  it("keeps the placeholder text for the extended protocol", () => {
    expect(statementsOf("select $1::int")[0]?.sql).toBe("select $1::int");
  });
});

describe("policy options", () => {
  it("denies COPY TO STDOUT when allowCopyOut is off", () => {
    const policy = { ...standardPolicy, name: "no-copy", allowCopyOut: false };
    expect(checkSql("COPY items TO STDOUT", policy)).toMatchObject({ kind: "deny", rule: "no-copy-out" });
    expect(checkSql("SELECT 1", policy).kind).toBe("allow");
  });

  it("lets a policy extend the settable parameters and forbidden functions", () => {
    const policy = {
      ...standardPolicy,
      name: "custom",
      settableParameters: new Set([...standardPolicy.settableParameters, "work_mem"]),
      forbiddenFunctions: new Set([...standardPolicy.forbiddenFunctions, "pg_sleep"]),
    };
    expect(checkSql("SET work_mem = '64MB'", policy).kind).toBe("allow");
    expect(checkSql("SELECT pg_catalog.pg_sleep(1)", policy)).toMatchObject({
      kind: "deny",
      rule: "forbidden-function",
    });
    expect(checkSql("SET work_mem = '64MB'").kind).toBe("deny");
  });
});

describe("relations a statement names, for per-table prices", () => {
  const relationsOf = (sql: string) =>
    statementsOf(sql).map((statement) => statement.relations?.slice().sort());

  it.each([
    ["SELECT 1", [[]]],
    ["SELECT * FROM airports", [["airports"]]],
    ["SELECT * FROM Public.Airports a JOIN routes r ON r.a = a.id", [["public.airports", "routes"]]],
    ['SELECT * FROM "Mixed Case"', [["Mixed Case"]]],
    ["SELECT (SELECT count(*) FROM runways) FROM airports", [["airports", "runways"]]],
    ["WITH x AS (SELECT * FROM runways) SELECT * FROM x", [["runways", "x"]]],
    ["TABLE airports", [["airports"]]],
    ["COPY airports TO STDOUT", [["airports"]]],
    ["DELETE FROM items WHERE id = 3 RETURNING *", [["items"]]],
    ["UPDATE items SET name = (SELECT name FROM airports LIMIT 1) WHERE id = 1", [["airports", "items"]]],
    ["SELECT 1 FROM a; SELECT 2 FROM b", [["a"], ["b"]]],
  ])("%s", (sql, expected) => {
    expect(relationsOf(sql)).toEqual(expected);
  });

  it("does not know what EXECUTE and FETCH read", () => {
    expect(relationsOf("EXECUTE q")).toEqual([undefined]);
    expect(relationsOf("FETCH 10 FROM c")).toEqual([undefined]);
  });
});
