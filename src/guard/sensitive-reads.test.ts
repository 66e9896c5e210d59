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
    "SELECT * FROM items LEFT JOIN LATERAL (SELECT * FROM pg_user_mappings) m ON true",
    "EXPLAIN (ANALYZE, FORMAT JSON) SELECT * FROM pg_largeobject",
    "DECLARE c CURSOR WITH HOLD FOR TABLE pg_file_settings",
    "COPY pg_catalog.pg_hba_file_rules TO STDOUT",
    "COPY (TABLE pg_ident_file_mappings) TO STDOUT",
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

describe("other sessions' statements and activity, whatever the spelling or nesting", () => {
  it.each([
    "SELECT query FROM pg_stat_activity",
    "SELECT query FROM pg_catalog.pg_stat_activity WHERE pid <> pg_backend_pid()",
    'SELECT "query" FROM "pg_catalog"."pg_stat_activity"',
    'SELECT * FROM PG_CATALOG."pg_stat_activity"',
    'SELECT * FROM U&"pg\\005fstat\\005factivity"',
    "TABLE pg_stat_activity",
    "SELECT * FROM items WHERE name IN (SELECT query FROM pg_stat_activity)",
    "WITH a AS (SELECT query FROM pg_stat_activity) SELECT * FROM a",
    "SELECT 1 UNION ALL SELECT count(*) FROM pg_stat_activity",
    "SELECT * FROM items, LATERAL (SELECT query FROM pg_stat_activity LIMIT 1) q",
    "EXPLAIN ANALYZE SELECT * FROM pg_stat_activity",
    "PREPARE spy AS SELECT query FROM pg_stat_activity",
    "DECLARE spy CURSOR FOR SELECT query FROM pg_stat_activity",
    "COPY pg_stat_activity TO STDOUT",
    "COPY (SELECT query FROM pg_stat_activity) TO STDOUT",
    "SELECT query FROM pg_stat_statements",
    "SELECT query FROM public.pg_stat_statements",
    "SELECT query FROM extensions.pg_stat_statements ORDER BY calls DESC",
    "SELECT * FROM pg_stat_statements_info",
    "SELECT * FROM pg_locks",
    "SELECT * FROM pg_catalog.pg_locks l JOIN items i ON l.relation = 'items'::regclass",
    "SELECT gid FROM pg_prepared_xacts",
    "SELECT * FROM pg_stat_progress_vacuum",
    "SELECT * FROM pg_stat_progress_create_index",
    "SELECT * FROM pg_stat_progress_copy",
    "SELECT * FROM pg_stat_ssl",
    "SELECT * FROM pg_stat_gssapi",
    "SELECT * FROM pg_stat_subscription",
    "SELECT * FROM pg_stat_replication",
    "SELECT * FROM pg_stat_wal_receiver",
    "SELECT * FROM pg_backend_memory_contexts",
    "SELECT * FROM pg_shmem_allocations",
    "SELECT * FROM pg_aios",
    "SELECT * FROM pg_wait_sampling_current",
    "SELECT * FROM pg_stat_monitor",
    "SELECT * FROM pg_qualstats",
  ])("denies %s (other-sessions)", (sql) => {
    expect(ruleOf(sql)).toBe("other-sessions");
  });

  it.each([
    "SELECT * FROM pg_stat_get_activity(NULL)",
    "SELECT (pg_stat_get_activity(NULL)).query",
    "SELECT pg_catalog.pg_stat_get_activity(NULL::int)",
    'SELECT * FROM "pg_catalog"."pg_stat_get_activity"(null)',
    "SELECT pg_stat_get_backend_activity(s.i) FROM pg_stat_get_backend_idset() AS s(i)",
    "SELECT pg_stat_get_backend_pid(1)",
    "SELECT pg_stat_get_backend_wait_event(2), pg_stat_get_backend_client_addr(2)",
    "SELECT * FROM pg_stat_get_progress_info('VACUUM')",
    "SELECT * FROM pg_stat_get_wal_senders()",
    "SELECT * FROM pg_stat_get_wal_receiver()",
    "SELECT * FROM pg_stat_get_subscription(NULL)",
    "SELECT * FROM pg_stat_statements(true)",
    "SELECT * FROM public.pg_stat_statements(false)",
    "SELECT * FROM pg_lock_status()",
    "SELECT pg_blocking_pids(1234)",
    "SELECT pg_safe_snapshot_blocking_pids(1234)",
    "SELECT pg_isolation_test_session_is_blocked(1, '{2}')",
    "SELECT * FROM pg_prepared_xact()",
    "SELECT * FROM pg_get_backend_memory_contexts()",
    "SELECT * FROM pg_get_shmem_allocations()",
    "SELECT * FROM pg_wait_sampling_get_current(NULL)",
    "SELECT * FROM items WHERE id IN (SELECT unnest(pg_blocking_pids(5)))",
    "WITH p AS (SELECT pg_stat_get_backend_activity(3) AS q) SELECT q FROM p",
  ])("denies %s (other-sessions)", (sql) => {
    expect(ruleOf(sql)).toBe("other-sessions");
  });

  it.each([
    "SELECT datname, numbackends, xact_commit, tup_returned FROM pg_stat_database",
    "SELECT relname, seq_scan, n_tup_ins, n_live_tup FROM pg_stat_user_tables",
    "SELECT * FROM pg_catalog.pg_statio_user_tables",
    "SELECT * FROM pg_stat_user_indexes",
    "SELECT * FROM pg_stat_xact_user_tables",
    "SELECT * FROM pg_stat_bgwriter",
    "SELECT pg_backend_pid()",
    "SELECT * FROM pg_prepared_statements",
    "SELECT * FROM pg_cursors",
    "SELECT * FROM myschema.pg_lock_history", // the provider's own table
    "SELECT 'pg_stat_activity' AS name",
  ])("allows %s", (sql) => {
    expect(ruleOf(sql)).toBe("allow");
  });

  it("never carries an allowed text to an activity read through the literal-mask cache", () => {
    const check = createVerdictCache();
    for (let i = 0; i < 3; i++) {
      expect(check("SELECT name FROM items WHERE id = 1").kind).toBe("allow");
      expect(check("SELECT 'pg_stat_activity' AS name").kind).toBe("allow");
    }
    expect(check("SELECT pg_blocking_pids(1)")).toMatchObject({ kind: "deny", rule: "other-sessions" });
    expect(check("SELECT pg_blocking_pids(2)")).toMatchObject({ kind: "deny", rule: "other-sessions" });
    expect(check("SELECT pg_stat_get_backend_activity(7)")).toMatchObject({ kind: "deny" });
    expect(check("SELECT query FROM pg_stat_activity WHERE pid = 1")).toMatchObject({ kind: "deny" });
  });
});
