import { randomBytes } from "node:crypto";
import pg from "pg";
import { loadAirportsDataset } from "./airports-dataset.js";
import { loadAirportsTables, type TableCount } from "./airports-tables.js";

/** Name of the sample database and of the role that owns it. */
export const SAMPLE_DATABASE = "pgtoll_sample";

export interface SampleDatabase {
  /** How the sample provider reaches the database: as its owner role, password included. */
  connectionString: string;
  database: string;
  tables: TableCount[];
}

/** Runs `use` on a connection of its own to `url`, closed after. */
export async function withClient<T>(url: string, use: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return await use(client);
  } finally {
    await client.end();
  }
}

/**
 * Creates, or reuses, the role and database `pgtoll_sample` on the cluster behind the superuser URL `adminUrl`,
 * and reloads the airports dataset into it, so every start begins from the same data.
 * The role owns that database and nothing else (no SUPERUSER, CREATEDB or CREATEROLE). It gets a fresh random
 * password on each call: a connection string from an earlier call stops working.
 * WARNING: the role can write its tables. Agents' writes go through pgtoll's guard and are charged like reads.
 */
export async function prepareSampleDatabase(adminUrl: string): Promise<SampleDatabase> {
  const password = randomBytes(18).toString("base64url");
  await withClient(adminUrl, async (admin) => {
    const role = admin.escapeIdentifier(SAMPLE_DATABASE);
    const exists = await admin.query("SELECT 1 FROM pg_roles WHERE rolname = $1", [SAMPLE_DATABASE]);
    const verb = exists.rowCount ? "ALTER" : "CREATE";
    await admin.query(
      `${verb} ROLE ${role} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE PASSWORD ${admin.escapeLiteral(password)}`,
    );
    const database = await admin.query("SELECT 1 FROM pg_database WHERE datname = $1", [SAMPLE_DATABASE]);
    if (!database.rowCount) await admin.query(`CREATE DATABASE ${role} OWNER ${role}`);
  });
  const url = new URL(adminUrl);
  url.username = SAMPLE_DATABASE;
  url.password = password;
  url.pathname = `/${SAMPLE_DATABASE}`;
  const connectionString = url.toString();
  const tables = await withClient(connectionString, (owner) =>
    loadAirportsTables(owner, loadAirportsDataset()),
  );
  return { connectionString, database: SAMPLE_DATABASE, tables };
}
