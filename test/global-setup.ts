import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import type { TestProject } from "vitest/node";
import { type EmbeddedCluster, startEmbeddedCluster } from "../src/db/embedded.js";
import { failRunOnTeardownError } from "./harness/teardown-failure.js";

declare module "vitest" {
  export interface ProvidedContext {
    /** Superuser URL of the cluster the tests create their databases on. */
    adminDatabaseUrl: string;
  }
}

/** Fails the run at once, naming the server, when the given PostgreSQL cannot be reached. */
async function checkReachable(url: string): Promise<void> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 10_000 });
  try {
    await client.connect();
    await client.query("SELECT 1");
  } catch (error) {
    const where = new URL(url).host;
    throw new Error(`PGTOLL_TEST_DATABASE_URL (${where}) cannot be reached: ${(error as Error).message}`);
  } finally {
    await client.end().catch(() => {});
  }
}

/**
 * One PostgreSQL for the whole run: `PGTOLL_TEST_DATABASE_URL` when set (any server, e.g. the machine's
 * PostgreSQL 15), otherwise an embedded PostgreSQL in a temporary directory. Each test file creates its own
 * database on it (test/support/database.ts).
 */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const given = process.env.PGTOLL_TEST_DATABASE_URL;
  if (given) {
    await checkReachable(given);
    project.provide("adminDatabaseUrl", given);
    return async () => {};
  }
  const dir = await mkdtemp(join(tmpdir(), "pgtoll-test-"));
  const cluster: EmbeddedCluster = await startEmbeddedCluster(dir);
  project.provide("adminDatabaseUrl", cluster.adminUrl);
  return failRunOnTeardownError(async () => {
    await cluster.stop();
    await rm(dir, { recursive: true, force: true });
  });
}
