import { randomBytes } from "node:crypto";
import { join } from "node:path";
import pg from "pg";
import { startEmbeddedCluster } from "../src/db/embedded.js";
import { libpqEnv, runChecked } from "./command.js";

/** Where a libpq client connects. */
export interface PgEndpoint {
  host: string;
  port: number;
  user: string;
  password: string;
  database: string;
}

/** The one PostgreSQL behind every target: pgbench's data (the provider's database) and pgtoll's metadata. */
export interface BenchCluster {
  adminUrl: string;
  /** The provider's database, holding the pgbench tables. */
  data: PgEndpoint;
  dataUrl: string;
  /** pgtoll's metadata and ledger database. */
  metaUrl: string;
  external: boolean;
  /** The embedded cluster's data directory (holds postmaster.pid); undefined for an external server. */
  dataDir: string | undefined;
  stop(): Promise<void>;
}

export const DATA_DATABASE = "pgtoll_bench";
export const META_DATABASE = "pgtoll_bench_meta";

/** Enough for the idle-session measurement (1 000 upstream sessions) plus the pools around it. */
const MAX_CONNECTIONS = 1200;

function withDatabase(url: string, database: string): string {
  const parsed = new URL(url);
  parsed.pathname = `/${database}`;
  return parsed.toString();
}

async function recreateDatabases(adminUrl: string): Promise<void> {
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  try {
    for (const name of [DATA_DATABASE, META_DATABASE]) {
      await admin.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
      await admin.query(`CREATE DATABASE "${name}"`);
    }
  } finally {
    await admin.end();
  }
}

/**
 * Starts the benchmark's PostgreSQL: the embedded one in `dir` (max_connections raised to 1 200), or the
 * server at `databaseUrl` (a superuser URL; its two benchmark databases are dropped and created anew).
 */
export async function startBenchCluster(dir: string, databaseUrl: string | undefined): Promise<BenchCluster> {
  let adminUrl: string;
  let stop = async () => {};
  if (databaseUrl) {
    adminUrl = databaseUrl;
  } else {
    const cluster = await startEmbeddedCluster(join(dir, "cluster"), {
      postgresFlags: ["-c", `max_connections=${MAX_CONNECTIONS}`],
    });
    adminUrl = cluster.adminUrl;
    stop = () => cluster.stop();
  }
  try {
    await recreateDatabases(adminUrl);
  } catch (error) {
    await stop();
    throw error;
  }
  const parsed = new URL(adminUrl);
  const data: PgEndpoint = {
    host: parsed.hostname || "127.0.0.1",
    port: Number(parsed.port || 5432),
    user: decodeURIComponent(parsed.username),
    password: decodeURIComponent(parsed.password),
    database: DATA_DATABASE,
  };
  return {
    adminUrl,
    data,
    dataUrl: withDatabase(adminUrl, DATA_DATABASE),
    metaUrl: withDatabase(adminUrl, META_DATABASE),
    external: Boolean(databaseUrl),
    dataDir: databaseUrl ? undefined : join(dir, "cluster", "postgres"),
    stop,
  };
}

/** `pgbench -i -s <scale>` straight against PostgreSQL (pgtoll's guard rightly refuses its DDL). */
export async function initialisePgbench(pgbench: string, target: PgEndpoint, scale: number): Promise<void> {
  await runChecked(
    pgbench,
    [
      "-i",
      "-q",
      "-s",
      String(scale),
      "-h",
      target.host,
      "-p",
      String(target.port),
      "-U",
      target.user,
      target.database,
    ],
    { env: libpqEnv(target.password) },
  );
}

/** The login role the benchmark's provider registers: it may read and write pgbench's tables, nothing more. */
export const PROVIDER_ROLE = "pgtoll_bench_provider";

/**
 * Creates (anew each run, with a fresh password) the least-privilege role pgtoll refuses to register without,
 * granted DML on the data database's tables once pgbench has created them. Returns its URL on that database.
 */
export async function createProviderRole(cluster: BenchCluster): Promise<string> {
  const password = randomBytes(18).toString("base64url");
  const admin = new pg.Client({ connectionString: cluster.dataUrl });
  await admin.connect();
  try {
    await admin.query(`DROP OWNED BY ${PROVIDER_ROLE}`).catch(() => {});
    await admin.query(`DROP ROLE IF EXISTS ${PROVIDER_ROLE}`);
    await admin.query(`CREATE ROLE ${PROVIDER_ROLE} LOGIN PASSWORD '${password}'`);
    await admin.query(
      `GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO ${PROVIDER_ROLE};
       GRANT USAGE ON ALL SEQUENCES IN SCHEMA public TO ${PROVIDER_ROLE}`,
    );
  } finally {
    await admin.end();
  }
  const url = new URL(cluster.dataUrl);
  url.username = PROVIDER_ROLE;
  url.password = password;
  return url.toString();
}
