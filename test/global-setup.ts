import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { TestProject } from "vitest/node";
import { type EmbeddedCluster, startEmbeddedCluster } from "../src/db/embedded.js";

declare module "vitest" {
  export interface ProvidedContext {
    /** Superuser URL of the cluster the tests create their databases on. */
    adminDatabaseUrl: string;
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
    project.provide("adminDatabaseUrl", given);
    return async () => {};
  }
  const dir = await mkdtemp(join(tmpdir(), "pgtoll-test-"));
  const cluster: EmbeddedCluster = await startEmbeddedCluster(dir);
  project.provide("adminDatabaseUrl", cluster.adminUrl);
  return async () => {
    await cluster.stop();
    await rm(dir, { recursive: true, force: true });
  };
}
