import type pg from "pg";
import { type Migration, migrations } from "./migrations.js";

/** Any fixed number: every pgtoll process takes the same advisory lock, so migrations run once. */
const MIGRATION_LOCK_KEY = 7_411_626_011;

/**
 * Applies the migrations that `schema_migrations` does not list yet, each in its own transaction, under an
 * advisory lock so that several processes starting at once apply each migration exactly once. Idempotent.
 * Returns the versions it applied.
 */
export async function migrate(pool: pg.Pool, list: readonly Migration[] = migrations): Promise<number[]> {
  const client = await pool.connect();
  const applied: number[] = [];
  try {
    await client.query("SELECT pg_advisory_lock($1)", [MIGRATION_LOCK_KEY]);
    await client.query(
      `CREATE TABLE IF NOT EXISTS schema_migrations (
         version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`,
    );
    const { rows } = await client.query<{ version: number }>("SELECT version FROM schema_migrations");
    const done = new Set(rows.map((row) => row.version));
    for (const migration of [...list].sort((a, b) => a.version - b.version)) {
      if (done.has(migration.version)) continue;
      await client.query("BEGIN");
      try {
        await client.query(migration.sql);
        await client.query("INSERT INTO schema_migrations (version, name) VALUES ($1, $2)", [
          migration.version,
          migration.name,
        ]);
        await client.query("COMMIT");
      } catch (error) {
        await client.query("ROLLBACK");
        throw new Error(
          `migration ${migration.version} (${migration.name}) failed: ${(error as Error).message}`,
        );
      }
      applied.push(migration.version);
    }
  } finally {
    await client.query("SELECT pg_advisory_unlock($1)", [MIGRATION_LOCK_KEY]).catch(() => {});
    client.release();
  }
  return applied;
}
