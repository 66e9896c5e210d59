import { beforeAll, describe, expect, it } from "vitest";
import { checkSql, loadGuard } from "./index.js";

beforeAll(() => loadGuard());

function ruleOf(sql: string): string {
  const verdict = checkSql(sql);
  return verdict.kind === "deny" ? verdict.rule : verdict.kind;
}

describe("UPDATE/DELETE WHERE must restrict the target's rows", () => {
  it.each([
    "DELETE FROM items WHERE NOT false",
    "DELETE FROM items WHERE (true)",
    "DELETE FROM items WHERE 2 > 1",
    "DELETE FROM items WHERE 'a' || 'b' = 'ab'",
    "DELETE FROM items WHERE true::bool",
    "DELETE FROM items WHERE 1 = 1 AND 2 = 2",
    "DELETE FROM items WHERE id = 3 OR true",
    "DELETE FROM items WHERE NOT (id = 3 OR 1 = 1)",
    "DELETE FROM items WHERE $1",
    "DELETE FROM items WHERE $1 = $1",
    "DELETE FROM items WHERE now() > '2000-01-01'",
    "DELETE FROM items WHERE current_user = 'postgres'",
    "DELETE FROM items WHERE NULL IS NULL",
    "DELETE FROM items WHERE EXISTS (SELECT 1)",
    "DELETE FROM items WHERE EXISTS (SELECT 1 FROM orders)",
    "DELETE FROM items WHERE EXISTS (SELECT 1 FROM orders WHERE item_id > 0)",
    "DELETE FROM items WHERE EXISTS (SELECT 1 FROM items WHERE items.id > 0)",
    "DELETE FROM items WHERE (SELECT count(*) FROM orders) > 0",
    "DELETE FROM items USING orders WHERE orders.item_id = 5",
    "DELETE FROM items i WHERE other.id = 1",
    "WITH x AS (SELECT 1) DELETE FROM public.items WHERE 1 = 1",
  ])("denies %s", (sql) => {
    expect(ruleOf(sql)).toBe("unbounded-delete");
  });

  it.each([
    "UPDATE items SET name = 'x' WHERE true",
    "UPDATE items SET name = 'x' WHERE NOT false",
    "UPDATE items i SET name = o.name FROM orders o WHERE o.id = 1",
    "UPDATE items SET name = 'x' WHERE id > 0 OR $1",
    "EXPLAIN UPDATE items SET name = 'x' WHERE 1 = 1",
    "PREPARE p AS UPDATE items SET name = $1 WHERE $2",
  ])("denies %s", (sql) => {
    expect(ruleOf(sql)).toBe("unbounded-update");
  });

  it.each([
    "DELETE FROM items WHERE id = $1",
    "DELETE FROM public.items WHERE public.items.id = 1",
    "DELETE FROM items AS i WHERE i.id = 1",
    "DELETE FROM items WHERE id = 1 AND true",
    "DELETE FROM items WHERE id = 1 OR id = 2",
    "DELETE FROM items WHERE NOT (id = 1)",
    "DELETE FROM items WHERE id IN (SELECT item_id FROM orders)",
    "DELETE FROM items WHERE EXISTS (SELECT 1 FROM orders o WHERE o.item_id = items.id)",
    "DELETE FROM items i WHERE EXISTS (SELECT 1 FROM orders o WHERE o.item_id = i.id)",
    "DELETE FROM items WHERE items IS NULL",
    "DELETE FROM items WHERE CURRENT OF c",
    "UPDATE items SET name = 'x' WHERE name IS NULL",
    'UPDATE "items" SET name = \'x\' WHERE "id" = 1',
    "UPDATE items i SET name = o.name FROM orders o WHERE o.item_id = i.id AND o.id = 7",
  ])("allows %s", (sql) => {
    expect(ruleOf(sql)).toBe("allow");
  });

  it("fails closed on a WHERE nested too deeply to analyse", () => {
    const verdict = checkSql(`DELETE FROM items WHERE ${"NOT ".repeat(3000)}id = 1`);
    expect(verdict).toMatchObject({ kind: "deny", rule: "too-complex" });
    expect(checkSql(`DELETE FROM items WHERE ${"NOT ".repeat(100)}id = 1`).kind).toBe("allow");
  });
});
