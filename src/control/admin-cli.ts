import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import pg from "pg";
import { type Config, loadConfig } from "../config.js";
import { lockDataDir } from "../db/data-dir-lock.js";
import { startEmbeddedCluster } from "../db/embedded.js";
import { migrate } from "../db/migrate.js";
import { createMetadataPool } from "../db/pool.js";
import { bootstrapAccount } from "./bootstrap.js";

/** The metadata database's name inside the embedded cluster (as server.ts names it). */
const EMBEDDED_DATABASE = "pgtoll";

export const ADMIN_USAGE = `Usage:
  pgtoll admin bootstrap --email EMAIL [--org NAME] [options]
      create a user (and an organization it administers) and print its first personal API key, once.
      It writes to the metadata database of DATABASE_URL (--database-url), or else to the embedded
      PostgreSQL of the data directory (--data-dir, default .pgtoll), running or not; the options are
      those of pgtoll start.`;

interface Output {
  out(line: string): void;
  err(line: string): void;
}

function takeFlag(args: string[], name: string): string | undefined {
  const index = args.findIndex((arg) => arg === `--${name}` || arg.startsWith(`--${name}=`));
  if (index < 0) return undefined;
  const [arg] = args.splice(index, 1);
  if (arg!.includes("=")) return arg!.slice(arg!.indexOf("=") + 1);
  const value = args.splice(index, 1)[0];
  if (value === undefined) throw new Error(`--${name} needs a value`);
  return value;
}

async function ensureDatabase(adminUrl: string, name: string): Promise<void> {
  const client = new pg.Client({ connectionString: adminUrl });
  await client.connect();
  try {
    const { rowCount } = await client.query("SELECT 1 FROM pg_database WHERE datname = $1", [name]);
    if (!rowCount) await client.query(`CREATE DATABASE "${name}"`);
  } finally {
    await client.end();
  }
}

/** The URL of the metadata database of a pgtoll that runs on this data directory right now. */
function runningEmbeddedUrl(dataDir: string): string {
  const pidFile = join(dataDir, "postgres", "postmaster.pid");
  const credentialsFile = join(dataDir, "credentials.json");
  if (!existsSync(pidFile) || !existsSync(credentialsFile))
    throw new Error(`no running embedded PostgreSQL in ${dataDir}`);
  const port = readFileSync(pidFile, "utf8").split("\n")[3]?.trim();
  const { user, password } = JSON.parse(readFileSync(credentialsFile, "utf8")) as {
    user: string;
    password: string;
  };
  return `postgres://${user}:${encodeURIComponent(password)}@127.0.0.1:${port}/${EMBEDDED_DATABASE}`;
}

/**
 * Runs `work` on the metadata database: DATABASE_URL's; else the embedded cluster of the data directory,
 * reached while `pgtoll start` runs on it, or started for the occasion when it does not.
 */
async function withMetadata<T>(config: Config, work: (db: pg.Pool) => Promise<T>): Promise<T> {
  let url = config.databaseUrl;
  let cleanup = async () => {};
  if (!url) {
    let unlock: (() => void) | undefined;
    try {
      unlock = lockDataDir(config.dataDir);
    } catch {
      url = runningEmbeddedUrl(config.dataDir);
    }
    if (unlock) {
      const release = unlock;
      try {
        const cluster = await startEmbeddedCluster(config.dataDir);
        cleanup = async () => {
          await cluster.stop();
          release();
        };
        await ensureDatabase(cluster.adminUrl, EMBEDDED_DATABASE);
        url = cluster.urlFor(EMBEDDED_DATABASE);
      } catch (error) {
        release();
        throw error;
      }
    }
  }
  const db = createMetadataPool(url!, 2);
  try {
    await migrate(db);
    return await work(db);
  } finally {
    await db.end();
    await cleanup();
  }
}

/** `pgtoll admin <command>`; returns the exit code. */
export async function runAdminCommand(argv: readonly string[], output: Output): Promise<number> {
  const [command, ...rest] = argv;
  if (command !== "bootstrap") {
    output.err(command ? `pgtoll admin: unknown command "${command}"\n${ADMIN_USAGE}` : ADMIN_USAGE);
    return 2;
  }
  const args = [...rest];
  const email = takeFlag(args, "email");
  const orgName = takeFlag(args, "org");
  const config = loadConfig(process.env, args, ["email", "org"]);
  if (!email) {
    output.err(`pgtoll admin bootstrap: --email is required\n${ADMIN_USAGE}`);
    return 2;
  }
  const result = await withMetadata(config, (db) => bootstrapAccount(db, email, orgName));
  output.out(`created user ${result.user.email} (id ${result.user.id})`);
  if (result.organization)
    output.out(`created organization ${result.organization.name} (id ${result.organization.id})`);
  output.out("personal API key (shown once: store it now):");
  output.out(result.apiKey);
  return 0;
}
