import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { physicalOf, query } from "./physical.js";
import { clusterUrlFor, eventually, type ManagementHarness, startManagement } from "./support.js";

let h: ManagementHarness;
let key: string;
let orgId: string;
beforeAll(async () => {
  h = await startManagement();
  const account = await h.bootstrap("Projects Inc");
  key = account.key;
  orgId = account.orgId!;
});
afterAll(async () => {
  await h?.close();
});

async function clusterMajorVersion(): Promise<number> {
  const admin = new pg.Client({ connectionString: clusterUrlFor("postgres") });
  await admin.connect();
  try {
    return (Number((await admin.query("SHOW server_version_num")).rows[0].server_version_num) / 10000) | 0;
  } finally {
    await admin.end();
  }
}

describe("projects", () => {
  it("are created with a default branch main, database neondb, role neondb_owner and one read_write endpoint", async () => {
    const response = await h.call(key, "POST", "/projects", { project: { name: "first", org_id: orgId } });
    expect(response.statusCode).toBe(201);
    const body = response.json();
    expect(body.project).toMatchObject({
      name: "first",
      org_id: orgId,
      owner_id: orgId,
      pg_version: await clusterMajorVersion(),
    });
    expect(body.branch).toMatchObject({
      name: "main",
      default: true,
      primary: true,
      current_state: "ready",
      project_id: body.project.id,
    });
    expect(body.databases).toEqual([
      expect.objectContaining({ name: "neondb", owner_name: "neondb_owner", branch_id: body.branch.id }),
    ]);
    expect(body.roles).toEqual([
      expect.objectContaining({
        name: "neondb_owner",
        password: expect.any(String),
        branch_id: body.branch.id,
      }),
    ]);
    expect(body.endpoints).toEqual([
      expect.objectContaining({
        type: "read_write",
        current_state: "active",
        branch_id: body.branch.id,
        host: `${body.endpoints[0].id}.localhost`,
      }),
    ]);
    expect(
      body.operations.map((op: { action: string; status: string }) => `${op.action}:${op.status}`),
    ).toEqual(["create_timeline:finished", "start_compute:finished"]);
    expect(body.connection_uris).toHaveLength(1);
    expect(body.connection_uris[0].connection_parameters).toEqual({
      database: "neondb",
      role: "neondb_owner",
      password: body.roles[0].password,
      host: body.endpoints[0].host,
      pooler_host: `${body.endpoints[0].id}-pooler.localhost`,
    });
    // the database and role exist for real
    expect(await query(h, body.branch.id, "SELECT 1 AS one")).toEqual([{ one: 1 }]);
  });

  it("take custom branch, database and role names; refuse a version or region this installation lacks", async () => {
    const custom = await h.call(key, "POST", "/projects", {
      project: { branch: { name: "trunk", database_name: "shop", role_name: "shopkeeper" } },
    });
    expect(custom.statusCode).toBe(201);
    expect(custom.json().branch.name).toBe("trunk");
    expect(custom.json().databases[0]).toMatchObject({ name: "shop", owner_name: "shopkeeper" });
    expect(custom.json().project.name).toBe(custom.json().project.id);
    expect(custom.json().project).not.toHaveProperty("org_id");
    const defaultRole = await h.call(key, "POST", "/projects", {
      project: { branch: { database_name: "app" } },
    });
    expect(defaultRole.json().roles[0].name).toBe("app_owner");

    const version = await h.call(key, "POST", "/projects", { project: { pg_version: 9 } });
    expect(version.statusCode).toBe(400);
    expect(version.json().message).toMatch(/pg_version 9/);
    expect(
      (await h.call(key, "POST", "/projects", { project: { region_id: "aws-us-east-2" } })).statusCode,
    ).toBe(400);
    expect(
      (await h.call(key, "POST", "/projects", { project: { org_id: "org-not-mine-1" } })).statusCode,
    ).toBe(404);
  });

  it("list newest first, `limit` at a time, following pagination.cursor, and filter by search and org_id", async () => {
    const account = await h.bootstrap("Lister");
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) {
      const created = await h.call(account.key, "POST", "/projects", {
        project: { name: `list-${i}`, ...(i % 2 ? { org_id: account.orgId } : {}) },
      });
      ids.push(created.json().project.id);
    }
    const seen: string[] = [];
    let cursor: string | undefined;
    for (let page = 0; page < 5; page++) {
      const response = await h.call(
        account.key,
        "GET",
        `/projects?limit=2${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`,
      );
      expect(response.statusCode).toBe(200);
      const body = response.json();
      expect(body.projects.length).toBeLessThanOrEqual(2);
      seen.push(...body.projects.map((p: { id: string }) => p.id));
      if (body.projects.length < 2) break;
      cursor = body.pagination.cursor;
    }
    expect(seen).toEqual([...ids].reverse());
    const inOrg = (await h.call(account.key, "GET", `/projects?org_id=${account.orgId}`))
      .json()
      .projects.map((p: { id: string }) => p.id);
    expect(inOrg.sort()).toEqual([ids[1], ids[3]].sort());
    const searched = (await h.call(account.key, "GET", "/projects?search=list-4")).json().projects;
    expect(searched.map((p: { name: string }) => p.name)).toEqual(["list-4"]);
    expect((await h.call(account.key, "GET", "/projects?cursor=garbage")).statusCode).toBe(400);
    expect((await h.call(account.key, "GET", "/projects?limit=0")).statusCode).toBe(400);
  });

  it("carry every field of the spec's project record, each with a measured or configured value", async () => {
    const created = (await h.call(key, "POST", "/projects", { project: { name: "measured" } })).json();
    const projectId = created.project.id;
    // spend some time executing statements on the project's database
    await query(h, created.branch.id, "SELECT pg_sleep(1.1)");
    const item = await eventually(
      async () => {
        const list = (await h.call(key, "GET", "/projects?limit=400")).json().projects;
        const found = list.find((p: { id: string }) => p.id === projectId);
        return found && found.cpu_used_sec >= 1 ? found : undefined;
      },
      15_000,
      "cpu_used_sec to count the statement",
    );
    expect(item).toMatchObject({
      id: projectId,
      name: "measured",
      platform_id: "pgtoll",
      region_id: "local",
      provisioner: "shared-cluster",
      pg_version: await clusterMajorVersion(),
      locked: false,
      proxy_host: "localhost",
      branch_logical_size_limit: 10_240,
      branch_logical_size_limit_bytes: 10_240 * 1024 * 1024,
    });
    expect(item.cpu_used_sec).toBeGreaterThanOrEqual(1);
    expect(item.cpu_used_sec).toBeLessThan(60);
    expect(item.synthetic_storage_size).toBeGreaterThan(1_000_000);
    for (const field of ["created_at", "updated_at"])
      expect(new Date(item[field]).toISOString()).toBe(item[field]);
    expect(Object.keys(item)).toEqual(
      expect.arrayContaining([
        "id",
        "name",
        "platform_id",
        "region_id",
        "provisioner",
        "pg_version",
        "locked",
        "cpu_used_sec",
        "created_at",
        "updated_at",
        "proxy_host",
        "branch_logical_size_limit",
      ]),
    );
  });

  it("are read, updated and deleted; deleting drops their databases and roles", async () => {
    const created = (
      await h.call(key, "POST", "/projects", { project: { name: "doomed", org_id: orgId } })
    ).json();
    const projectId = created.project.id;
    const got = await h.call(key, "GET", `/projects/${projectId}`);
    expect(got.json().project).toMatchObject({
      id: projectId,
      name: "doomed",
      consumption_period_start: expect.any(String),
    });

    const updated = await h.call(key, "PATCH", `/projects/${projectId}`, {
      project: { name: "spared", settings: { allowed_ips: { ips: [] } } },
    });
    expect(updated.statusCode).toBe(200);
    expect(updated.json().project).toMatchObject({ name: "spared", settings: { allowed_ips: { ips: [] } } });
    expect(updated.json().operations).toEqual([]);
    expect(Date.parse(updated.json().project.updated_at)).toBeGreaterThan(
      Date.parse(created.project.updated_at),
    );

    const physical = await physicalOf(h, created.branch.id);
    const deleted = await h.call(key, "DELETE", `/projects/${projectId}`);
    expect(deleted.statusCode).toBe(200);
    expect(deleted.json().project.id).toBe(projectId);
    expect((await h.call(key, "GET", `/projects/${projectId}`)).statusCode).toBe(404);
    const admin = new pg.Client({ connectionString: clusterUrlFor("postgres") });
    await admin.connect();
    try {
      expect(
        (await admin.query("SELECT 1 FROM pg_database WHERE datname = $1", [physical.database])).rowCount,
      ).toBe(0);
      expect((await admin.query("SELECT 1 FROM pg_roles WHERE rolname = $1", [physical.role])).rowCount).toBe(
        0,
      );
    } finally {
      await admin.end();
    }
  });

  it("an organization member manages but cannot delete organization projects; its owner or an admin can", async () => {
    const admin = await h.bootstrap("Deleters");
    const created = (
      await h.call(admin.key, "POST", "/projects", { project: { org_id: admin.orgId } })
    ).json();
    const invited = await h.call(admin.key, "POST", `/organizations/${admin.orgId}/invitations`, {
      invitations: [{ email: `m${Date.now()}@example.com`, role: "member" }],
    });
    expect(invited.statusCode).toBe(200);
    const { createPersonalKey } = await import("../../src/control/api-keys.js");
    const { findUserByEmail } = await import("../../src/control/users.js");
    const member = await findUserByEmail(h.meta, invited.json().invitations[0].email);
    const memberKey = (await createPersonalKey(h.meta, member!.id, "m")).token;
    expect(
      (
        await h.call(memberKey, "PATCH", `/projects/${created.project.id}`, {
          project: { name: "by member" },
        })
      ).statusCode,
    ).toBe(200);
    expect((await h.call(memberKey, "DELETE", `/projects/${created.project.id}`)).statusCode).toBe(403);
    expect((await h.call(admin.key, "DELETE", `/projects/${created.project.id}`)).statusCode).toBe(200);
  });
});
