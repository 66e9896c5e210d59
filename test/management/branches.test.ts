import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connectAs, physicalOf, query } from "./physical.js";
import { clusterUrlFor, type ManagementHarness, startManagement } from "./support.js";

let h: ManagementHarness;
let key: string;
beforeAll(async () => {
  h = await startManagement({ settings: { fenceGraceMs: 1000 } });
  key = (await h.bootstrap()).key;
});
afterAll(async () => {
  await h?.close();
});

async function newProject(rows = 3) {
  const created = await h.call(key, "POST", "/projects", { project: { name: "branching" } });
  expect(created.statusCode, created.body).toBe(201);
  const { project, branch } = created.json();
  await query(
    h,
    branch.id,
    `CREATE TABLE items (id serial PRIMARY KEY, name text NOT NULL);
    INSERT INTO items (name) SELECT 'item ' || g FROM generate_series(1, ${rows}) g;`,
  );
  return { projectId: project.id as string, mainId: branch.id as string };
}

async function branch(projectId: string, body: object = {}) {
  const response = await h.call(key, "POST", `/projects/${projectId}/branches`, body);
  expect(response.statusCode, response.body).toBe(201);
  return response.json();
}

const count = async (branchId: string) =>
  Number((await query<{ n: string }>(h, branchId, "SELECT count(*) AS n FROM items"))[0]!.n);

describe("branches", () => {
  it("a parent-data branch is a real copy: the parent's rows, its own writes, the parent's roles", async () => {
    const { projectId, mainId } = await newProject(3);
    const created = await branch(projectId, { branch: { name: "dev" }, endpoints: [{ type: "read_write" }] });
    expect(created.branch).toMatchObject({
      name: "dev",
      parent_id: mainId,
      current_state: "ready",
      init_source: "parent-data",
      default: false,
    });
    expect(created.branch.parent_lsn).toMatch(/^[0-9A-F]+\/[0-9A-F]+$/);
    expect(Date.parse(created.branch.parent_timestamp)).toBeGreaterThan(Date.now() - 60_000);
    expect(created.endpoints).toHaveLength(1);
    expect(created.endpoints[0]).toMatchObject({
      type: "read_write",
      current_state: "active",
      branch_id: created.branch.id,
    });
    expect(
      created.operations.map((op: { action: string; status: string }) => [op.action, op.status]),
    ).toEqual([
      ["create_branch", "finished"],
      ["start_compute", "finished"],
    ]);
    expect(created.roles.map((r: { name: string }) => r.name)).toEqual(["neondb_owner"]);
    expect(created.databases.map((d: { name: string }) => d.name)).toEqual(["neondb"]);
    expect(created.connection_uris[0].connection_uri).toContain(`@${created.endpoints[0].host}`);

    const dev = created.branch.id as string;
    expect(await count(dev)).toBe(3);
    await query(h, dev, "INSERT INTO items (name) VALUES ('only on dev')");
    expect([await count(dev), await count(mainId)]).toEqual([4, 3]);
    // the copy is a database of its own, reached with the same role and password as the parent
    const [a, b] = [await physicalOf(h, dev), await physicalOf(h, mainId)];
    expect(a.database).not.toBe(b.database);
    expect(a.role).toBe(b.role);
  });

  it("a schema-only branch has the parent's schema and no rows; identities start over", async () => {
    const { projectId } = await newProject(5);
    const { branch: copy } = await branch(projectId, { branch: { init_source: "schema-only" } });
    expect(copy.init_source).toBe("schema-only");
    expect(await count(copy.id)).toBe(0);
    const [row] = await query<{ id: number }>(
      h,
      copy.id,
      "INSERT INTO items (name) VALUES ('first') RETURNING id",
    );
    expect(row!.id).toBe(1);
  });

  it("branches from a given parent, lists with limit and cursor, counts, renames, refuses duplicate names", async () => {
    const { projectId, mainId } = await newProject(1);
    const first = (await branch(projectId, { branch: { name: "a" } })).branch;
    const child = (await branch(projectId, { branch: { name: "b", parent_id: first.id } })).branch;
    expect(child.parent_id).toBe(first.id);
    expect(await count(child.id)).toBe(1);
    const duplicate = await h.call(key, "POST", `/projects/${projectId}/branches`, { branch: { name: "a" } });
    expect(duplicate.statusCode).toBe(409);
    expect(duplicate.json().code).toBe("CONFLICT");

    const seen: string[] = [];
    let cursor: string | undefined;
    do {
      const page = await h.call(
        key,
        "GET",
        `/projects/${projectId}/branches?limit=2&sort_by=name&sort_order=asc${cursor ? `&cursor=${cursor}` : ""}`,
      );
      expect(page.statusCode).toBe(200);
      expect(page.json().annotations).toEqual({});
      seen.push(...page.json().branches.map((b: { name: string }) => b.name));
      cursor = page.json().pagination?.next;
    } while (cursor);
    expect(seen).toEqual(["a", "b", "main"]);
    expect((await h.call(key, "GET", `/projects/${projectId}/branches/count`)).json()).toEqual({ count: 3 });

    const renamed = await h.call(key, "PATCH", `/projects/${projectId}/branches/${first.id}`, {
      branch: { name: "renamed" },
    });
    expect(renamed.statusCode).toBe(200);
    expect(renamed.json().branch.name).toBe("renamed");
    expect(
      (
        await h.call(key, "PATCH", `/projects/${projectId}/branches/${first.id}`, {
          branch: { name: "main" },
        })
      ).statusCode,
    ).toBe(409);
    expect(
      (await h.call(key, "GET", `/projects/${projectId}/branches/${mainId}`)).json().branch.default,
    ).toBe(true);
  });

  it("deletes a leaf branch and its database for real; refuses the default branch and a branch with children", async () => {
    const { projectId, mainId } = await newProject(1);
    const parent = (await branch(projectId, { branch: { name: "parent" } })).branch;
    const leaf = (
      await branch(projectId, {
        branch: { name: "leaf", parent_id: parent.id },
        endpoints: [{ type: "read_only" }],
      })
    ).branch;
    const leafDatabase = (await physicalOf(h, leaf.id)).database;

    expect((await h.call(key, "DELETE", `/projects/${projectId}/branches/${mainId}`)).statusCode).toBe(409);
    const withChildren = await h.call(key, "DELETE", `/projects/${projectId}/branches/${parent.id}`);
    expect(withChildren.statusCode).toBe(409);
    expect(withChildren.json().message).toMatch(/child/);

    const deleted = await h.call(key, "DELETE", `/projects/${projectId}/branches/${leaf.id}`);
    expect(deleted.statusCode).toBe(200);
    expect(deleted.json().branch.id).toBe(leaf.id);
    expect(deleted.json().operations.map((op: { action: string }) => op.action)).toEqual([
      "suspend_compute",
      "delete_timeline",
    ]);
    expect((await h.call(key, "GET", `/projects/${projectId}/branches/${leaf.id}`)).statusCode).toBe(404);
    const admin = new pg.Client({ connectionString: clusterUrlFor("postgres") });
    await admin.connect();
    try {
      expect(
        (await admin.query("SELECT 1 FROM pg_database WHERE datname = $1", [leafDatabase])).rowCount,
      ).toBe(0);
    } finally {
      await admin.end();
    }
    expect((await h.call(key, "DELETE", `/projects/${projectId}/branches/${parent.id}`)).statusCode).toBe(
      200,
    );
  });

  it("restores a branch from its parent, optionally preserving its previous state under a new name", async () => {
    const { projectId, mainId } = await newProject(2);
    const dev = (await branch(projectId, { branch: { name: "dev" } })).branch;
    await query(h, dev.id, "DELETE FROM items");
    await query(h, mainId, "INSERT INTO items (name) VALUES ('new on main')");

    const restored = await h.call(key, "POST", `/projects/${projectId}/branches/${dev.id}/restore`, {
      source_branch_id: mainId,
      preserve_under_name: "dev-before",
    });
    expect(restored.statusCode, restored.body).toBe(200);
    expect(restored.json().branch).toMatchObject({
      id: dev.id,
      current_state: "ready",
      last_reset_at: expect.any(String),
    });
    expect(await count(dev.id)).toBe(3);
    const branches = (await h.call(key, "GET", `/projects/${projectId}/branches`)).json().branches;
    const preserved = branches.find((b: { name: string }) => b.name === "dev-before");
    expect(await count(preserved.id)).toBe(0);

    // without preserve_under_name the previous state goes; a branch with children must preserve it
    await query(h, dev.id, "DELETE FROM items");
    const plain = await h.call(key, "POST", `/projects/${projectId}/branches/${dev.id}/restore`, {
      source_branch_id: mainId,
    });
    expect(plain.statusCode).toBe(200);
    expect(await count(dev.id)).toBe(3);
    await branch(projectId, { branch: { name: "grandchild", parent_id: dev.id } });
    expect(
      (
        await h.call(key, "POST", `/projects/${projectId}/branches/${dev.id}/restore`, {
          source_branch_id: mainId,
        })
      ).statusCode,
    ).toBe(400);
    expect(
      (
        await h.call(key, "POST", `/projects/${projectId}/branches/${dev.id}/restore`, {
          source_branch_id: mainId,
          source_timestamp: "2020-01-01T00:00:00Z",
        })
      ).statusCode,
    ).toBe(400);
  });

  it("creates a branch of the default branch, named after its id, from a request without a body", async () => {
    const { projectId, mainId } = await newProject(1);
    const response = await h.app.inject({
      method: "POST",
      url: `/api/v2/projects/${projectId}/branches`,
      headers: { authorization: `Bearer ${key}` },
    });
    expect(response.statusCode, response.body).toBe(201);
    const created = response.json();
    expect(created.branch).toMatchObject({ parent_id: mainId, name: created.branch.id });
    expect(created.endpoints).toEqual([]);
    expect(created).not.toHaveProperty("connection_uris");
  });

  it("keeps projects apart: a project's role cannot connect to another project's databases", async () => {
    const one = await newProject(1);
    const two = await newProject(1);
    const theirs = await physicalOf(h, two.mainId);
    const mine = await physicalOf(h, one.mainId);
    const intruder = new pg.Client({
      connectionString: clusterUrlFor(theirs.database, { name: mine.role, password: mine.password }),
    });
    await expect(intruder.connect()).rejects.toThrow(/permission denied/);
    await intruder.end().catch(() => {});
    // and neither project role can create databases or roles
    const client = await connectAs(h, one.mainId);
    try {
      await expect(client.query("CREATE ROLE intruder")).rejects.toThrow(/permission denied/);
    } finally {
      await client.end();
    }
  });
});
