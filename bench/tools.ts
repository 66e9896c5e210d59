import { execFileSync } from "node:child_process";
import { accessSync, constants, readdirSync } from "node:fs";
import { delimiter, join } from "node:path";

/** The external programs the benchmark drives, with the Debian package each comes from. */
export interface BenchTools {
  pgbench: string;
  pgbouncer: string | null;
}

function executable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

function onPath(name: string): string | null {
  const dirs = [...(process.env.PATH ?? "").split(delimiter), "/usr/sbin", "/usr/local/sbin", "/sbin"];
  for (const dir of dirs) {
    if (dir && executable(join(dir, name))) return join(dir, name);
  }
  return null;
}

/** The newest /usr/lib/postgresql/<major>/bin/pgbench: the real binary, not Debian's pg_wrapper script. */
function debianPgbench(): string | null {
  let majors: string[];
  try {
    majors = readdirSync("/usr/lib/postgresql").filter((name) => /^\d+$/.test(name));
  } catch {
    return null;
  }
  for (const major of majors.sort((a, b) => Number(b) - Number(a))) {
    const path = `/usr/lib/postgresql/${major}/bin/pgbench`;
    if (executable(path)) return path;
  }
  return null;
}

/** `<tool> --version`, first line. */
export function toolVersion(path: string): string {
  try {
    return execFileSync(path, ["--version"], { encoding: "utf8" }).split("\n")[0]!.trim();
  } catch {
    return "unknown";
  }
}

/**
 * Finds pgbench and PgBouncer (`PGTOLL_BENCH_PGBENCH` / `PGTOLL_BENCH_PGBOUNCER` override the search).
 * Throws a message naming the Debian package to install when pgbench is missing, or PgBouncer is missing
 * while `needPgbouncer`.
 */
export function findTools(needPgbouncer: boolean): BenchTools {
  const pgbench = process.env.PGTOLL_BENCH_PGBENCH || debianPgbench() || onPath("pgbench");
  const pgbouncer = process.env.PGTOLL_BENCH_PGBOUNCER || onPath("pgbouncer");
  const missing: string[] = [];
  // Debian ships the pgbench binary with the server package (postgresql-<major>); /usr/bin/pgbench is only
  // postgresql-client-common's wrapper around it.
  if (!pgbench)
    missing.push("pgbench (Debian package postgresql, i.e. postgresql-<major>: apt-get install postgresql)");
  if (!pgbouncer && needPgbouncer)
    missing.push("pgbouncer (Debian package pgbouncer: apt-get install pgbouncer)");
  if (missing.length > 0) {
    throw new Error(
      `the benchmark needs programs that are not installed:\n  - ${missing.join("\n  - ")}\n` +
        "Install them (apt-get update && apt-get install -y postgresql pgbouncer), or point " +
        "PGTOLL_BENCH_PGBENCH / PGTOLL_BENCH_PGBOUNCER at them.",
    );
  }
  return { pgbench: pgbench!, pgbouncer };
}
