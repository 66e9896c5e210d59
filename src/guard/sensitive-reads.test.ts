import { beforeAll, describe, expect, it } from "vitest";
import { checkSql, loadGuard } from "./index.js";
import { createVerdictCache } from "./verdict-cache.js";

beforeAll(() => loadGuard());

function ruleOf(sql: string): string {
  const verdict = checkSql(sql);
  return verdict.kind === "deny" ? verdict.rule : verdict.kind;
}

describe("sensitive catalogs, whatever the spelling or nesting", () => {
  it.each([
    "SELECT * FROM pg_authid",
    "SELECT * FROM PG_CATALOG.PG_AUTHID",
    'SELECT * FROM "pg_catalog"."pg_authid"',
    "SELECT * FROM pg_shadow s WHERE s.usename = 'x'",
    "SELECT (SELECT passwd FROM pg_shadow LIMIT 1)",
    "SELECT * FROM items WHERE EXISTS (SELECT 1 FROM pg_authid)",
    "WITH RECURSIVE r AS (SELECT rolname FROM pg_authid) SELECT * FROM r",
    "SELECT 1 EXCEPT SELECT 1 FROM pg_statistic",
    "SELECT * FROM items LEFT JOIN LATERAL (SELECT * FROM pg_user_mappings) m ON true",
    "EXPLAIN (ANALYZE, FORMAT JSON) SELECT * FROM pg_largeobject",
    "DECLARE c CURSOR WITH HOLD FOR TABLE pg_file_settings",
    "COPY pg_catalog.pg_hba_file_rules TO STDOUT",
    "COPY (TABLE pg_ident_file_mappings) TO STDOUT",
    "PREPARE q AS SELECT * FROM pg_statistic_ext_data",
    "SELECT name, setting FROM pg_settings WHERE name = 'data_directory'",
  ])("denies %s (sensitive-catalog)", (sql) => {
    expect(ruleOf(sql)).toBe("sensitive-catalog");
  });

  it.each([
    "SELECT * FROM pg_config()",
    "SELECT * FROM pg_catalog.pg_show_all_settings()",
    "SELECT * FROM pg_hba_file_rules()",
    "SELECT count(*) FROM pg_show_all_file_settings()",
  ])("denies %s (forbidden-function)", (sql) => {
    expect(ruleOf(sql)).toBe("forbidden-function");
  });

  it.each([
    "SELECT * FROM myschema.pg_authid", // a user table of that name in another schema
    "SELECT rolname FROM pg_roles",
    "SELECT * FROM pg_catalog.pg_tables",
    "SELECT * FROM information_schema.columns WHERE table_name = 'items'",
  ])("allows %s", (sql) => {
    expect(ruleOf(sql)).toBe("allow");
  });
});

describe("settings that reveal the server's files", () => {
  it.each([
    "SHOW data_directory",
    "SHOW Config_File",
    'SHOW "hba_file"',
    "SHOW ALL",
    "SELECT current_setting('data_directory')",
    "SELECT current_setting('ssl_key_file', true)",
    "SELECT pg_catalog.current_setting('archive_command')",
    "SELECT CURRENT_SETTING('Data_Directory')",
    "SELECT current_setting(name) FROM items",
    "SELECT current_setting($1)",
    "SELECT current_setting('data' || '_directory')",
  ])("denies %s (sensitive-setting)", (sql) => {
    expect(ruleOf(sql)).toBe("sensitive-setting");
  });

  it.each([
    "SHOW search_path",
    "SELECT current_setting('timezone')",
    "SELECT current_setting('work_mem', true)",
  ])("allows %s", (sql) => {
    expect(ruleOf(sql)).toBe("allow");
  });

  it("never carries an allowed current_setting name to a sensitive one through the literal-mask cache", () => {
    const check = createVerdictCache();
    for (let i = 0; i < 3; i++) expect(check("SELECT current_setting('search_path')").kind).toBe("allow");
    expect(check("SELECT current_setting('data_directory')")).toMatchObject({
      kind: "deny",
      rule: "sensitive-setting",
    });
    expect(check("SELECT current_setting('config_file'), 1")).toMatchObject({ kind: "deny" });
  });
});

describe("row locks", () => {
  it.each([
    "SELECT * FROM items FOR UPDATE",
    "SELECT * FROM items WHERE id = 1 FOR NO KEY UPDATE NOWAIT",
    "SELECT * FROM items FOR SHARE SKIP LOCKED",
    "SELECT * FROM items FOR KEY SHARE OF items",
    "select * from items for update",
    "SELECT * FROM (SELECT id FROM items FOR UPDATE) s",
    "WITH l AS (SELECT id FROM items FOR SHARE) SELECT * FROM l",
    "SELECT 1 UNION SELECT id FROM (SELECT id FROM items FOR UPDATE) x",
    "DECLARE c CURSOR FOR SELECT * FROM items FOR UPDATE",
    "PREPARE q AS SELECT * FROM items WHERE id = $1 FOR UPDATE",
    "EXPLAIN ANALYZE SELECT * FROM items FOR UPDATE",
  ])("denies %s (no-row-lock)", (sql) => {
    expect(ruleOf(sql)).toBe("no-row-lock");
  });
});
