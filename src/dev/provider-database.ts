import { randomBytes } from "node:crypto";
import type pg from "pg";
import { withClient } from "./sample-database.js";

/** Names `pgtoll dev-provider-db` accepts: a plain lower-case identifier, so no quoting question arises. */
export const DATABASE_NAME = /^[a-z][a-z0-9_]{0,39}$/;

/** Databases of the cluster that are not a provider's to take. */
const RESERVED = new Set(["postgres", "template0", "template1", "pgtoll_sample"]);

/** The sample table's rows: id, name, price in USD, in stock. */
const PRODUCTS: readonly [number, string, string, boolean][] = [
  [1, "Espresso cup", "8.50", true],
  [2, "Pour-over kettle", "42.00", true],
  [3, "Burr grinder", "129.00", false],
  [4, "Paper filters (100)", "6.90", true],
  [5, "Milk jug", "15.00", true],
  [6, "Scale 0.1 g", "24.00", true],
  [7, "Cold brew bottle", "19.50", false],
  [8, "Tamper 58 mm", "31.00", true],
];

export interface ProviderDatabase {
  database: string;
  /** The role agents run as; it may log in, connect, and read `products`, nothing else. */
  role: string;
  /** `postgres://role:password@127.0.0.1:port/database`, for `POST /api/providers/register`. */
  connectionString: string;
}

/** The sample table, and the agents' role's rights: CONNECT, USAGE on public, SELECT on products. */
async function fillDatabase(owner: pg.Client, name: string, role: string): Promise<void> {
  await owner.query(`REVOKE ALL ON DATABASE ${name} FROM PUBLIC`);
  await owner.query(`REVOKE CREATE ON SCHEMA public FROM PUBLIC`);
  await owner.query(
    "CREATE TABLE products (id int PRIMARY KEY, name text NOT NULL, price_usd numeric(10, 2) NOT NULL, in_stock boolean NOT NULL)",
  );
  await owner.query(
    `INSERT INTO products VALUES ${PRODUCTS.map((_, i) => `($${4 * i + 1}, $${4 * i + 2}, $${4 * i + 3}, $${4 * i + 4})`).join(", ")}`,
    PRODUCTS.flat(),
  );
  await owner.query(`GRANT CONNECT ON DATABASE ${name} TO ${role}`);
  await owner.query(`GRANT USAGE ON SCHEMA public TO ${role}`);
  await owner.query(`GRANT SELECT ON products TO ${role}`);
}

/**
 * Creates database `name` on the cluster behind the superuser URL `adminUrl`, with a table `products` of a few
 * rows, and the role `<name>_agents` as docs/security.md's "A role for agents" describes: LOGIN with a generated
 * password, CONNECT on the database, USAGE on schema public, SELECT on `products`, and none of the rights
 * registration refuses. Throws, creating nothing, when the name is malformed, reserved or taken.
 */
export async function createProviderDatabase(adminUrl: string, name: string): Promise<ProviderDatabase> {
  if (!DATABASE_NAME.test(name) || RESERVED.has(name) || name === new URL(adminUrl).pathname.slice(1)) {
    throw new Error(
      `"${name}" cannot be a provider database: use a lower-case name of letters, digits and _ (at most 40, starting with a letter), not postgres, pgtoll's own or pgtoll_sample`,
    );
  }
  const role = `${name}_agents`;
  const password = randomBytes(18).toString("base64url");
  await withClient(adminUrl, async (admin) => {
    const taken = await admin.query(
      "SELECT (SELECT count(*) FROM pg_database WHERE datname = $1)::int AS databases, (SELECT count(*) FROM pg_roles WHERE rolname = $2)::int AS roles",
      [name, role],
    );
    const { databases, roles } = taken.rows[0] as { databases: number; roles: number };
    if (databases || roles) {
      throw new Error(
        `the database ${name}${roles ? ` or the role ${role}` : ""} exists already on the dev stack's PostgreSQL: pick another --name`,
      );
    }
    await admin.query(`CREATE DATABASE ${name}`);
    try {
      await admin.query(
        `CREATE ROLE ${role} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS PASSWORD ${admin.escapeLiteral(password)}`,
      );
    } catch (error) {
      await admin.query(`DROP DATABASE ${name}`);
      throw error;
    }
  });
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  try {
    await withClient(url.toString(), (owner) => fillDatabase(owner, name, role));
  } catch (error) {
    // Half a provider database is none: a second try with the same name would find it taken.
    await withClient(adminUrl, async (admin) => {
      await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await admin.query(`DROP ROLE IF EXISTS ${role}`);
    });
    throw error;
  }
  url.username = role;
  url.password = password;
  return { database: name, role, connectionString: url.toString() };
}
