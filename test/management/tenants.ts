import pg from "pg";
import { expect } from "vitest";
import { clusterUrlFor, type ManagementHarness } from "./support.js";

/** A new project (its default branch shaped by `branch`), with its role prefix from the metadata. */
export async function newTenantProject(h: ManagementHarness, key: string, branch: object = {}) {
  const created = await h.call(key, "POST", "/projects", { project: { name: "tenant", branch } });
  expect(created.statusCode, created.body).toBe(201);
  const body = created.json();
  const { rows } = await h.meta.query("SELECT role_prefix FROM projects WHERE id = $1", [body.project.id]);
  return {
    projectId: body.project.id as string,
    branchId: body.branch.id as string,
    rolePrefix: rows[0].role_prefix as string,
  };
}

/** The SQLSTATE of a login as `role` to `database` on the cluster (loopback, right password), or "ok". */
export async function loginOutcome(
  database: string,
  role: { name: string; password: string },
): Promise<string> {
  const client = new pg.Client({ connectionString: clusterUrlFor(database, role) });
  client.on("error", () => {});
  try {
    await client.connect();
    await client.end();
    return "ok";
  } catch (error) {
    return (error as { code?: string }).code ?? String(error);
  }
}

/** The name of the harness's metadata database (on the test cluster, beside the projects' databases). */
export async function metadataDatabaseOf(h: ManagementHarness): Promise<string> {
  return (await h.meta.query("SELECT current_database() AS d")).rows[0].d as string;
}
