import { describe, expect, it } from "vitest";
import { createTestDatabase } from "../../test/support/database.js";
import { migrate } from "./migrate.js";
import { migrations } from "./migrations.js";
import { createMetadataPool } from "./pool.js";

describe("migrate", () => {
  it("applies every migration once, even when several processes start together", async () => {
    const db = await createTestDatabase();
    const pools = [
      createMetadataPool(db.url, 2),
      createMetadataPool(db.url, 2),
      createMetadataPool(db.url, 2),
    ];
    try {
      const results = await Promise.all(pools.map((pool) => migrate(pool)));
      const applied = results.flat().sort();
      expect(applied).toEqual(migrations.map((m) => m.version).sort());
      expect(await migrate(pools[0]!)).toEqual([]);
      const { rows } = await pools[0]!.query("SELECT count(*)::int AS n FROM schema_migrations");
      expect(rows[0].n).toBe(migrations.length);
    } finally {
      await Promise.all(pools.map((pool) => pool.end()));
      await db.drop();
    }
  });

  it("rolls back a failing migration and names it", async () => {
    const db = await createTestDatabase();
    const pool = createMetadataPool(db.url, 2);
    try {
      await expect(
        migrate(pool, [{ version: 1, name: "broken", sql: "CREATE TABLE a (id int); SELEC 1" }]),
      ).rejects.toThrow(/migration 1 \(broken\) failed/);
      const { rows } = await pool.query("SELECT to_regclass('a') AS t");
      expect(rows[0].t).toBeNull();
    } finally {
      await pool.end();
      await db.drop();
    }
  });
});
