import { beforeAll, describe, expect, it } from "vitest";
import { checkSql, loadGuard } from "./index.js";

beforeAll(() => loadGuard());

function ruleOf(sql: string): string {
  const verdict = checkSql(sql);
  return verdict.kind === "deny" ? verdict.rule : verdict.kind;
}

describe("forbidden functions, whatever the spelling or nesting", () => {
  it.each([
    "SELECT PG_READ_FILE('/etc/passwd')",
    "SELECT pg_catalog.PG_READ_FILE($$/etc/passwd$$)",
    'SELECT "pg_catalog"."pg_read_file"(\'/etc/passwd\')',
    "SELECT U&\"pg\\005fread_file\"('/etc/passwd')",
    "SELECT U&\"\\0070g_read_binary_file\"('/etc/passwd')",
    "SELECT pg_read_file /* c */ ('/etc/passwd')",
    "SELECT * FROM pg_ls_waldir()",
    "SELECT * FROM ROWS FROM (pg_ls_tmpdir()) t",
    "SELECT 1 FROM items WHERE id IN (SELECT pg_cancel_backend(1))",
    "SELECT (SELECT (SELECT set_config('role', 'postgres', false)))",
    "WITH x AS (SELECT set_config($1, $2, false)) SELECT 1",
    "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE pg_terminate_backend(n)) SELECT 1",
    "EXPLAIN SELECT pg_reload_conf()",
    "EXPLAIN ANALYZE SELECT lo_import('/etc/passwd')",
    "PREPARE p AS SELECT lo_unlink(1)",
    "PREPARE p AS INSERT INTO items (name) VALUES (pg_read_file('x'))",
    "DECLARE c CURSOR FOR SELECT dblink('dbname=x', 'select 1')",
    "COPY (SELECT query_to_xml('delete from items', true, true, '')) TO STDOUT",
    "EXECUTE q(pg_read_file('/etc/passwd'))",
    "SELECT count(*) FILTER (WHERE pg_cancel_backend(1)) FROM items",
    "SELECT CASE WHEN true THEN pg_switch_wal() END",
    "UPDATE items SET name = pg_read_file('x') WHERE id = 1",
    "INSERT INTO items (name) VALUES ('a') ON CONFLICT (id) DO UPDATE SET name = pg_read_file('x')",
    "SELECT * FROM ts_stat('select to_tsvector(name) from items')",
    "SELECT ts_rewrite('a'::tsquery, 'select 1')",
    "SELECT table_to_xml('items', true, true, '')",
    "SELECT pg_notify('ch', 'payload')",
    "SELECT pg_advisory_lock(1)",
    "SELECT pg_try_advisory_xact_lock(1)",
    "SELECT setval('items_id_seq', 1)",
    "SELECT lowrite(0, 'x')",
    "SELECT my_schema.dblink_exec('x')",
  ])("denies %s", (sql) => {
    expect(ruleOf(sql)).toBe("forbidden-function");
  });

  it.each([
    "SELECT pg_sleep(0)",
    "SELECT current_setting('search_path')",
    "SELECT nextval('items_id_seq')",
    "SELECT name AS pg_read_file FROM items",
    "SELECT 'pg_read_file(''/etc/passwd'')'",
    "SELECT lower('LO_IMPORT')",
    'SELECT "lo_import" FROM (SELECT 1 AS "lo_import") t',
  ])("allows %s", (sql) => {
    expect(ruleOf(sql)).toBe("allow");
  });
});

describe("statement kinds, whatever the spelling or nesting", () => {
  it.each([
    ["no-drop", "DROP TABLE public.items"],
    ["no-drop", 'DROP TABLE "items"'],
    ["no-drop", "select 1;\n-- comment\nDROP VIEW v"],
    ["no-drop", "DROP ROLE evil"],
    ["no-truncate", "TRUNCATE public.items, orders"],
    ["no-ddl", "CREATE TEMP TABLE t (id int)"],
    ["no-ddl", "CREATE VIEW v AS SELECT 1"],
    ["no-ddl", "CREATE INDEX ON items (name)"],
    ["no-ddl", "EXPLAIN CREATE TABLE x AS SELECT 1"],
    ["no-ddl", "CREATE MATERIALIZED VIEW mv AS SELECT 1"],
    ["no-ddl", "SECURITY LABEL ON TABLE items IS 'x'"],
    ["no-ddl", "ALTER DEFAULT PRIVILEGES GRANT SELECT ON TABLES TO public"],
    ["no-ddl", "GRANT pg_read_server_files TO current_user"],
    ["no-select-into", "SELECT 1 INTO t UNION SELECT 2"],
    ["no-select-into", "SELECT * INTO TEMP t FROM items"],
    [
      "no-merge",
      "MERGE INTO items t USING orders s ON t.id = s.item_id WHEN MATCHED THEN UPDATE SET name = 'x'",
    ],
    [
      "no-merge",
      "MERGE INTO items t USING orders s ON t.id = s.item_id WHEN NOT MATCHED THEN INSERT VALUES (1)",
    ],
    ["no-maintenance", "VACUUM"],
    ["no-maintenance", "ANALYZE items"],
    ["no-listen", "LISTEN ch"],
    ["no-discard", "DISCARD PLANS"],
    ["no-two-phase-commit", "PREPARE TRANSACTION 'x'"],
    ["no-two-phase-commit", "COMMIT PREPARED 'x'"],
    ["no-alter-system", "ALTER SYSTEM RESET ALL"],
    ["no-do", "BEGIN; DO $$ BEGIN END $$; COMMIT"],
    ["system-catalog-write", "UPDATE pg_settings SET setting = '0' WHERE name = 'statement_timeout'"],
    ["system-catalog-write", "DELETE FROM pg_catalog.pg_largeobject WHERE loid = 1"],
    ["system-catalog-write", "INSERT INTO information_schema.sql_features VALUES ('x')"],
  ])("%s: %s", (rule, sql) => {
    expect(ruleOf(sql)).toBe(rule);
  });

  it.each([
    "select 1 ; ; select 2 ;",
    "/* leading */ SELECT 1",
    "WITH i AS (SELECT id FROM items) SELECT * FROM i",
    "INSERT INTO items (name) VALUES ('a') ON CONFLICT DO NOTHING",
    "START TRANSACTION ISOLATION LEVEL SERIALIZABLE, READ ONLY",
    "BEGIN; SAVEPOINT a; RELEASE SAVEPOINT a; ROLLBACK TO SAVEPOINT a; END",
    "ABORT",
    "SET CONSTRAINTS ALL DEFERRED",
    "SHOW server_version",
    "EXPLAIN EXECUTE q(1)",
    "EXPLAIN (FORMAT JSON, GENERIC_PLAN) SELECT * FROM items WHERE id = $1",
    "DECLARE c SCROLL CURSOR WITH HOLD FOR SELECT * FROM items",
    "MOVE FORWARD 5 IN c",
    "CLOSE ALL",
    "DEALLOCATE ALL",
    "UNLISTEN *",
  ])("allows %s", (sql) => {
    expect(ruleOf(sql)).toBe("allow");
  });
});

describe("SET and RESET", () => {
  it.each([
    "SET application_name TO 'x'",
    "SET LOCAL application_name = 'x'",
    "SET SESSION TimeZone = 'UTC'",
    'SET "TimeZone" TO DEFAULT',
    "SET TIME ZONE LOCAL",
    "RESET TIME ZONE",
    "SET datestyle = iso, mdy",
    "SET IntervalStyle = postgres",
    'SET search_path TO public, "$user"',
    "SET SCHEMA 'public'",
    "RESET search_path",
    "SET NAMES 'UTF8'",
    "SET client_encoding = 'utf-8'",
    "SET extra_float_digits = 3",
    "SET bytea_output = hex",
    "SET XML OPTION DOCUMENT",
    "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ",
    "SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY",
  ])("allows %s", (sql) => {
    expect(ruleOf(sql)).toBe("allow");
  });

  it.each([
    "SET statement_timeout TO DEFAULT",
    'SET "statement_timeout" = 0',
    "SET SESSION STATEMENT_TIMEOUT = 0",
    "RESET ROLE",
    "SET ROLE NONE",
    "SET SESSION AUTHORIZATION DEFAULT",
    "RESET SESSION AUTHORIZATION",
    "SET lock_timeout = 0",
    "SET idle_in_transaction_session_timeout = 0",
    "SET work_mem = '4GB'",
    "SET standard_conforming_strings = off",
    "SET backslash_quote = on",
    "SET NAMES 'SJIS'",
    "SET client_encoding TO DEFAULT",
    "RESET client_encoding",
    "SET TRANSACTION SNAPSHOT '00000003-0000001B-1'",
    "SELECT 1; RESET ALL",
  ])("denies %s", (sql) => {
    expect(ruleOf(sql)).toBe("forbidden-setting");
  });
});

describe("COPY", () => {
  it.each([
    ["allow", "COPY items TO STDOUT"],
    ["allow", "copy public.items (id, name) to stdout with (format csv, header)"],
    ["allow", "COPY (SELECT * FROM items WHERE id < 10) TO STDOUT"],
    [
      "no-data-modifying-cte",
      "COPY (WITH d AS (DELETE FROM items WHERE id = 1 RETURNING *) SELECT * FROM d) TO STDOUT",
    ],
    ["no-copy-from", "COPY items FROM STDIN"],
    ["no-copy-from", "COPY items (name) FROM STDIN WITH (FORMAT csv)"],
    ["no-copy-file", "COPY items FROM '/tmp/items.csv'"],
    ["no-copy-file", "COPY (SELECT 1) TO '/tmp/x'"],
    ["no-copy-program", "COPY (SELECT 1) TO PROGRAM 'sh'"],
    ["no-data-modifying-cte", "COPY (UPDATE items SET name = 'x' WHERE id = 1 RETURNING *) TO STDOUT"],
    ["forbidden-function", "COPY (SELECT pg_read_file('/etc/passwd')) TO STDOUT"],
  ])("%s: %s", (rule, sql) => {
    expect(ruleOf(sql)).toBe(rule);
  });
});

describe("invalid input", () => {
  it.each([
    "",
    "\n\t ",
    ";",
    " ; ; ",
    "/* only a comment */",
    "-- a\n-- b",
    "SELECT 1\u0000; DROP TABLE items",
    "SELECT '\ud800'",
    "SELECT 1 +",
    'SELECT "unterminated',
    "SELECT $$unterminated",
    "\\d items",
  ])("rejects %j", (sql) => {
    expect(checkSql(sql).kind).toBe("invalid");
  });
});
