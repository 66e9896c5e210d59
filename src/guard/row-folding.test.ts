import { beforeAll, describe, expect, it } from "vitest";
import { checkSql, loadGuard, standardPolicy } from "./index.js";
import { ProviderGuards } from "./provider-guards.js";
import type { GuardPolicy } from "./types.js";
import { createVerdictCache } from "./verdict-cache.js";

beforeAll(() => loadGuard());

const priced: GuardPolicy = {
  ...standardPolicy,
  tablePrices: new Map([
    ["secret_prices", 1_000_000n],
    ["vault.keys", 5_000_000n],
  ]),
};
const allowing: GuardPolicy = { ...priced, allowRowFolding: true };

function ruleOf(sql: string, policy: GuardPolicy = priced): string {
  const verdict = checkSql(sql, policy);
  return verdict.kind === "deny" ? verdict.rule : verdict.kind;
}

const FOLDING = [
  "SELECT string_agg(secret, ',') FROM secret_prices",
  "SELECT array_agg(secret) FROM secret_prices",
  "SELECT json_agg(s) FROM secret_prices s",
  "SELECT jsonb_agg(secret ORDER BY id) FROM secret_prices",
  "SELECT json_object_agg(id, secret) FROM secret_prices",
  "SELECT jsonb_object_agg(id, secret) FROM secret_prices",
  "SELECT jsonb_object_agg_unique_strict(id, secret) FROM secret_prices",
  "SELECT json_agg_strict(secret) FROM secret_prices",
  "SELECT xmlagg(xmlelement(name s, secret)) FROM secret_prices",
  "SELECT range_agg(int4range(id, id + 1)) FROM secret_prices",
  "SELECT pg_catalog.string_agg(secret, ',') FROM secret_prices",
  'SELECT "pg_catalog"."STRING_AGG"(secret, \',\') FROM secret_prices',
  "SELECT string_agg(secret, ',') OVER () FROM secret_prices LIMIT 1",
  "SELECT JSON_ARRAYAGG(secret) FROM secret_prices",
  "SELECT JSON_OBJECTAGG(id : secret) FROM secret_prices",
  "SELECT JSON_ARRAY(SELECT secret FROM secret_prices)",
  "SELECT ARRAY(SELECT secret FROM secret_prices)",
  "SELECT array_to_string(ARRAY(SELECT secret FROM secret_prices), ',')",
  "SELECT (SELECT secret FROM secret_prices WHERE id = 1), (SELECT secret FROM secret_prices WHERE id = 2)",
  "SELECT ROW((SELECT secret FROM secret_prices WHERE id = 1))",
  "SELECT * FROM concat((SELECT secret FROM secret_prices WHERE id = 1), (SELECT secret FROM secret_prices WHERE id = 2)) c",
  "SELECT * FROM (VALUES ((SELECT secret FROM secret_prices WHERE id = 1))) v",
  "WITH a AS (SELECT secret FROM secret_prices WHERE id = 1) SELECT (SELECT secret FROM a)",
  "SELECT string_agg(secret, ',')::int FROM secret_prices WHERE id BETWEEN 1 AND 6",
  "SELECT count(*) FROM items WHERE name IN (SELECT string_agg(secret, ',') FROM secret_prices)",
  "SELECT string_agg(secret, ',') FROM public.secret_prices",
  "SELECT string_agg(k, ',') FROM keys",
  "SELECT string_agg(k, ',') FROM vault.keys",
  "WITH RECURSIVE r(i, acc) AS (SELECT 0, ''::text UNION ALL SELECT r.i + 1, r.acc || s.secret FROM r JOIN secret_prices s ON s.id = r.i + 1) SELECT acc FROM r ORDER BY i DESC LIMIT 1",
  "EXPLAIN ANALYZE SELECT string_agg(secret, ',') FROM secret_prices",
  "PREPARE q AS SELECT array_agg(secret) FROM secret_prices",
  "DECLARE c CURSOR FOR SELECT array_agg(secret) FROM secret_prices",
  "COPY (SELECT string_agg(secret, ',') FROM secret_prices) TO STDOUT",
  "INSERT INTO items (name) SELECT string_agg(secret, ',') FROM secret_prices",
  "UPDATE items SET name = (SELECT secret FROM secret_prices WHERE id = 1) WHERE id = 1",
  "UPDATE items SET (name, note) = (SELECT secret, secret FROM secret_prices WHERE id = 1) WHERE id = 1",
];

describe("folding rows of a priced table into one (priced-table-folding)", () => {
  it.each(FOLDING)("refuses %s", (sql) => {
    expect(ruleOf(sql)).toBe("priced-table-folding");
  });

  it.each(FOLDING)("allows it when the provider allows folding: %s", (sql) => {
    expect(ruleOf(sql, allowing)).toBe("allow");
  });

  it.each(FOLDING)("allows it when no table is priced: %s", (sql) => {
    expect(ruleOf(sql, standardPolicy)).toBe("allow");
  });

  it.each([
    "SELECT string_agg(name, ',') FROM items",
    "SELECT array_agg(name), ARRAY(SELECT id FROM orders) FROM items",
    "SELECT (SELECT name FROM items WHERE id = 1), (SELECT name FROM items WHERE id = 2)",
    "SELECT string_agg(k, ',') FROM other.keys",
    "SELECT secret FROM secret_prices WHERE id = 1",
    "SELECT count(*), sum(id), max(secret) FROM secret_prices",
    "SELECT secret FROM secret_prices WHERE id = (SELECT max(id) FROM secret_prices)",
    "SELECT s.secret FROM secret_prices s JOIN items i ON i.id = (SELECT min(id) FROM items)",
    "SELECT id FROM secret_prices GROUP BY id HAVING count(*) > (SELECT 1)",
    "SELECT secret FROM secret_prices WHERE id IN (SELECT id FROM items) AND EXISTS (SELECT 1 FROM orders)",
  ])("allows %s", (sql) => {
    expect(ruleOf(sql)).toBe("allow");
  });

  it("marks what reads a priced table, and what it cannot see (EXECUTE, FETCH), for its text to be withheld", () => {
    const marks = (sql: string) => {
      const verdict = checkSql(sql, priced);
      if (verdict.kind !== "allow") throw new Error(JSON.stringify(verdict));
      return verdict.statements.map((statement) => statement.readsPricedTable ?? false);
    };
    expect(marks("SELECT secret FROM secret_prices; SELECT name FROM items")).toEqual([true, false]);
    expect(marks("SELECT 1 FROM items WHERE EXISTS (SELECT 1 FROM vault.keys)")).toEqual([true]);
    expect(marks("SELECT 1 FROM other.keys")).toEqual([false]);
    expect(marks("EXECUTE q; FETCH 1 FROM c")).toEqual([true, true]);
    const standard = checkSql("SELECT secret FROM secret_prices; EXECUTE q", standardPolicy);
    expect(standard.kind === "allow" && standard.statements.some((s) => s.readsPricedTable)).toBe(false);
  });

  it("gives each provider's pricing its own verdicts, on every learned literal shape", () => {
    const shared = createVerdictCache();
    const guards = new ProviderGuards(standardPolicy, shared);
    const plain = guards.checkFor({ readOnly: false });
    const pricedCheck = guards.checkFor({
      readOnly: false,
      tablePricesMicroPer1000Rows: priced.tablePrices!,
    });
    const allowed = guards.checkFor({
      readOnly: false,
      tablePricesMicroPer1000Rows: priced.tablePrices!,
      allowRowFolding: true,
    });
    expect(plain).toBe(shared);
    expect(
      guards.checkFor({ readOnly: false, tablePricesMicroPer1000Rows: new Map(priced.tablePrices!) }),
    ).toBe(pricedCheck);
    for (let i = 1; i < 4; i++) {
      const sql = `SELECT string_agg(secret, ',') FROM secret_prices WHERE id < ${i}`;
      expect(plain(sql).kind).toBe("allow");
      expect(allowed(sql).kind).toBe("allow");
      expect(pricedCheck(sql)).toMatchObject({ kind: "deny", rule: "priced-table-folding" });
    }
    const readOnly = guards.checkFor({ readOnly: true, tablePricesMicroPer1000Rows: priced.tablePrices! });
    expect(readOnly("SELECT array_agg(secret) FROM secret_prices")).toMatchObject({
      rule: "priced-table-folding",
    });
    expect(readOnly("SET transaction_read_only = off")).toMatchObject({ kind: "deny" });
  });
});

describe("keeping a priced table's values in the session for a later statement", () => {
  it.each([
    [
      "SELECT set_config('application_name', secret, false) FROM secret_prices WHERE id = 1",
      "forbidden-function",
    ],
    ["SELECT secret INTO TEMP kept FROM secret_prices", "no-select-into"],
    ["CREATE TEMP TABLE kept AS SELECT secret FROM secret_prices", "no-ddl"],
    ["CREATE TEMP TABLE kept (secret text)", "no-ddl"],
    ["SELECT setval('items_id_seq', length(secret)) FROM secret_prices WHERE id = 1", "forbidden-function"],
    ["SELECT pg_advisory_lock(ascii(secret)) FROM secret_prices WHERE id = 1", "forbidden-function"],
    ["SELECT pg_notify('c', secret) FROM secret_prices WHERE id = 1", "forbidden-function"],
    ["INSERT INTO items (name) SELECT string_agg(secret, ',') FROM secret_prices", "priced-table-folding"],
    ["DECLARE c CURSOR WITH HOLD FOR SELECT array_agg(secret) FROM secret_prices", "priced-table-folding"],
  ])("refuses %s (%s)", (sql, rule) => {
    expect(ruleOf(sql)).toBe(rule);
  });
});

describe("the planner's statistics (column-statistics)", () => {
  it.each([
    "SELECT most_common_vals::text, histogram_bounds::text FROM pg_stats WHERE tablename = 'secret_prices'",
    "SELECT * FROM pg_catalog.pg_stats",
    'SELECT * FROM "PG_STATS"',
    "SELECT * FROM PG_CATALOG.PG_STATS_EXT",
    "SELECT * FROM pg_stats_ext_exprs",
    "SELECT * FROM pg_statistic",
    "SELECT * FROM pg_statistic_ext_data",
    "SELECT * FROM myschema.pg_stats",
    "SELECT 1 EXCEPT SELECT 1 FROM pg_statistic",
    "PREPARE q AS SELECT * FROM pg_statistic_ext_data",
    "SELECT * FROM items WHERE name IN (SELECT attname FROM pg_stats)",
    "WITH s AS (SELECT * FROM pg_stats) SELECT 1",
    "EXPLAIN SELECT * FROM pg_stats",
    "COPY pg_stats TO STDOUT",
    "SELECT * FROM pg_mcv_list_items(NULL)",
    "SELECT pg_catalog.pg_restore_attribute_stats('relation', 'items'::regclass)",
  ])("refuses %s whatever the pricing", (sql) => {
    expect(ruleOf(sql, standardPolicy)).toBe("column-statistics");
    expect(ruleOf(sql, allowing)).toBe("column-statistics");
  });

  it.each([
    "SELECT * FROM pg_statio_user_tables",
    "SELECT * FROM pg_stat_user_tables",
    "SELECT 'pg_stats'",
    // Extended statistics' definitions, no value: psql's \d reads them.
    "SELECT oid, stxname, stxkeys FROM pg_catalog.pg_statistic_ext WHERE stxrelid = 'items'::regclass",
  ])("allows %s", (sql) => {
    expect(ruleOf(sql, standardPolicy)).toBe("allow");
  });
});
