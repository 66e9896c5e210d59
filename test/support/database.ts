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

/** A database owned by a role of its own: no superuser or other administrative right, as providers register. */
export interface OwnedTestDatabase extends TestDatabase {
  /** The owner role's URL (what a provider registers). */
  url: string;
  /** The test cluster's superuser, on this database. */
  adminUrl: string;
  role: string;
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

/** Runs `sql` on its own connection to `url` (the cluster's superuser by default); returns the last result's rows. */
export async function runSql<T extends pg.QueryResultRow = pg.QueryResultRow>(
  sql: string,
  url: string = inject("adminDatabaseUrl"),
): Promise<T[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const result = (await client.query<T>(sql)) as pg.QueryResult<T> | pg.QueryResult<T>[];
    return Array.isArray(result) ? (result.at(-1)?.rows ?? []) : result.rows;
  } finally {
    await client.end();
  }
}

/**
 * Creates a database and a login role that owns it and nothing else: the least-privilege role a provider
 * registers (it may create tables in its own database; it is no superuser and has no administrative right).
 */
export async function createOwnedTestDatabase(prefix = "t"): Promise<OwnedTestDatabase> {
  const db = await createTestDatabase(prefix);
  const role = `${db.name}_owner`;
  const password = randomBytes(12).toString("hex");
  await runSql(
    `CREATE ROLE "${role}" LOGIN PASSWORD '${password}'; ALTER DATABASE "${db.name}" OWNER TO "${role}";`,
  );
  const url = new URL(db.url);
  url.username = role;
  url.password = password;
  return {
    url: url.toString(),
    adminUrl: db.url,
    name: db.name,
    role,
    async drop() {
      await db.drop();
      await runSql(`DROP ROLE IF EXISTS "${role}"`);
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
