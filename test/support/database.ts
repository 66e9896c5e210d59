import { randomBytes } from "node:crypto";
import pg from "pg";
import { inject } from "vitest";
import { migrate } from "../../src/db/migrate.js";
import { createMetadataPool } from "../../src/db/pool.js";

export interface TestDatabase {
  url: string;
  name: string;
  drop(): Promise<void>;
}

function withDatabase(url: string, database: string): string {
  const parsed = new URL(url);
  parsed.pathname = `/${database}`;
  return parsed.toString();
}

/** Creates an empty database with a unique name on the test cluster. */
export async function createTestDatabase(prefix = "t"): Promise<TestDatabase> {
  const adminUrl = inject("adminDatabaseUrl");
  const name = `${prefix}_${randomBytes(6).toString("hex")}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE "${name}"`);
  } finally {
    await admin.end();
  }
  const url = withDatabase(adminUrl, name);
  return {
    url,
    name,
    async drop() {
      const client = new pg.Client({ connectionString: adminUrl });
      await client.connect();
      try {
        await client.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
      } finally {
        await client.end();
      }
    },
  };
}

/** A migrated metadata database and its pool. */
export async function createMetadataDatabase(): Promise<{
  db: TestDatabase;
  pool: pg.Pool;
  close(): Promise<void>;
}> {
  const db = await createTestDatabase("meta");
  const pool = createMetadataPool(db.url, 50);
  await migrate(pool);
  return {
    db,
    pool,
    async close() {
      await pool.end();
      await db.drop();
    },
  };
}
