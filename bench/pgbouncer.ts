import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { chown, mkdir, readFile, writeFile } from "node:fs/promises";
import { userInfo } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { freePort } from "../src/db/embedded.js";
import type { PgEndpoint } from "./bench-cluster.js";

export interface RunningPgbouncer {
  endpoint: PgEndpoint;
  pid: number;
  stop(): Promise<void>;
}

/** PgBouncer refuses to run as root: as root it is started with `-u postgres`, in a directory that user owns. */
function unprivilegedUser(): { name: string; uid: number; gid: number } | null {
  if (userInfo().uid !== 0) return null;
  try {
    const [uid, gid] = ["-u", "-g"].map((flag) =>
      Number(execFileSync("id", [flag, "postgres"], { encoding: "utf8" }).trim()),
    );
    return { name: "postgres", uid: uid!, gid: gid! };
  } catch {
    throw new Error(
      "PgBouncer will not run as root and there is no `postgres` user to run it as: run the benchmark as a normal user",
    );
  }
}

function quote(value: string): string {
  return `"${value.replace(/"/g, '""')}"`;
}

async function waitUntilReady(endpoint: PgEndpoint, child: ChildProcess, logFile: string): Promise<void> {
  const deadline = Date.now() + 15_000;
  for (;;) {
    if (child.exitCode !== null) {
      const log = await readFile(logFile, "utf8").catch(() => "");
      throw new Error(
        `pgbouncer exited with ${child.exitCode}:\n${log.trim().split("\n").slice(-5).join("\n")}`,
      );
    }
    const client = new pg.Client({ ...endpoint, connectionTimeoutMillis: 2000 });
    try {
      await client.connect();
      await client.query("SELECT 1");
      await client.end();
      return;
    } catch (error) {
      await client.end().catch(() => {});
      if (Date.now() > deadline)
        throw new Error(`pgbouncer did not accept connections: ${(error as Error).message}`);
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  }
}

/**
 * Starts PgBouncer in session mode in front of `upstream`, on a free loopback port, with its ini and userlist in
 * `dir`. Clients authenticate with SCRAM using the upstream's own user and password; the pool is large enough
 * that no benchmark client ever waits for a server connection.
 */
export async function startPgbouncer(
  binary: string,
  dir: string,
  upstream: PgEndpoint,
  poolSize: number,
): Promise<RunningPgbouncer> {
  await mkdir(dir, { recursive: true });
  const port = await freePort();
  const runAs = unprivilegedUser();
  const logFile = join(dir, "pgbouncer.log");
  const ini = join(dir, "pgbouncer.ini");
  const userlist = join(dir, "userlist.txt");
  await writeFile(userlist, `${quote(upstream.user)} ${quote(upstream.password)}\n`, { mode: 0o600 });
  await writeFile(
    ini,
    [
      "[databases]",
      `${upstream.database} = host=${upstream.host} port=${upstream.port} dbname=${upstream.database}`,
      "",
      "[pgbouncer]",
      "listen_addr = 127.0.0.1",
      `listen_port = ${port}`,
      "unix_socket_dir =",
      "auth_type = scram-sha-256",
      `auth_file = ${userlist}`,
      "pool_mode = session",
      `default_pool_size = ${poolSize}`,
      `max_client_conn = ${poolSize * 4}`,
      `logfile = ${logFile}`,
      `pidfile = ${join(dir, "pgbouncer.pid")}`,
      "log_connections = 0",
      "log_disconnections = 0",
      "log_stats = 0",
      "ignore_startup_parameters = extra_float_digits",
      "",
    ].join("\n"),
    { mode: 0o600 },
  );
  if (runAs) {
    await chown(dir, runAs.uid, runAs.gid);
    await chown(ini, runAs.uid, runAs.gid);
    await chown(userlist, runAs.uid, runAs.gid);
  }
  const child = spawn(binary, [...(runAs ? ["-u", runAs.name] : []), ini], {
    stdio: ["ignore", "ignore", "pipe"],
  });
  child.stderr?.resume();
  const endpoint: PgEndpoint = {
    host: "127.0.0.1",
    port,
    user: upstream.user,
    password: upstream.password,
    database: upstream.database,
  };
  try {
    await waitUntilReady(endpoint, child, logFile);
  } catch (error) {
    child.kill("SIGKILL");
    throw error;
  }
  return {
    endpoint,
    pid: child.pid!,
    async stop() {
      if (child.exitCode !== null) return;
      const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
      // SIGTERM is an immediate shutdown (SIGINT would wait for clients to leave).
      child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), 5000);
      await exited;
      clearTimeout(timer);
    },
  };
}
