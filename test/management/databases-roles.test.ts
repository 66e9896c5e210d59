import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connectAs, physicalOf, query } from "./physical.js";
import { clusterUrlFor, type ManagementHarness, startManagement } from "./support.js";

let h: ManagementHarness;
let key: string;
/** Process warnings emitted while the API starts (fastify reports route schemas it doubts this way). */
const startupWarnings: string[] = [];
beforeAll(async () => {
  const onWarning = (warning: Error) => startupWarnings.push(`${warning.name}: ${warning.message}`);
  process.on("warning", onWarning);
  try {
    h = await startManagement();
    // Warnings are emitted on the next tick.
    await new Promise((resolve) => setImmediate(resolve));
  } finally {
    process.off("warning", onWarning);
  }
  key = (await h.bootstrap()).key;
});
afterAll(async () => {
  await h?.close();
});

async function newProject(extra: object = {}) {
  const created = await h.call(key, "POST", "/projects", { project: { name: "data", ...extra } });
  expect(created.statusCode, created.body).toBe(201);
  const body = created.json();
  return { projectId: body.project.id as string, branchId: body.branch.id as string, body };
}

async function clusterHas(kind: "database" | "role", name: string): Promise<boolean> {
  const admin = new pg.Client({ connectionString: clusterUrlFor("postgres") });
  await admin.connect();
  try {
    const sql =
      kind === "database"
        ? "SELECT 1 FROM pg_database WHERE datname = $1"
        : "SELECT 1 FROM pg_roles WHERE rolname = $1";
    return Boolean((await admin.query(sql, [name])).rowCount);
  } finally {
    await admin.end();
  }
}

async function canLogin(database: string, role: string, password: string): Promise<boolean> {
  const client = new pg.Client({ connectionString: clusterUrlFor(database, { name: role, password }) });
  client.on("error", () => {});
  try {
    await client.connect();
    await client.end();
    return true;
  } catch {
    return false;
  }
}

it("defines the database and role routes without a start-up warning", () => {
  expect(startupWarnings).toEqual([]);
});

describe("databases", () => {
  it("are created, listed, renamed and deleted, for real", async () => {
    const { projectId, branchId } = await newProject();
    const base = `/projects/${projectId}/branches/${branchId}/databases`;
    const created = await h.call(key, "POST", base, {
      database: { name: "analytics", owner_name: "neondb_owner" },
    });
    expect(created.statusCode, created.body).toBe(201);
    expect(created.json().database).toMatchObject({
      name: "analytics",
      owner_name: "neondb_owner",
      branch_id: branchId,
      id: expect.any(Number),
    });
    expect(created.json().operations).toEqual([
      expect.objectContaining({ action: "apply_config", status: "finished" }),
    ]);
    await query(h, branchId, "CREATE TABLE facts (v int); INSERT INTO facts VALUES (42)", "analytics");

    expect(
      (await h.call(key, "POST", base, { database: { name: "analytics", owner_name: "neondb_owner" } }))
        .statusCode,
    ).toBe(409);
    expect(
      (await h.call(key, "POST", base, { database: { name: "x", owner_name: "nobody" } })).statusCode,
    ).toBe(400);
    expect((await h.call(key, "GET", base)).json().databases.map((d: { name: string }) => d.name)).toEqual([
      "neondb",
      "analytics",
    ]);

    const renamed = await h.call(key, "PATCH", `${base}/analytics`, { database: { name: "facts" } });
    expect(renamed.statusCode).toBe(200);
    expect(renamed.json().database.name).toBe("facts");
    expect(await query(h, branchId, "SELECT v FROM facts", "facts")).toEqual([{ v: 42 }]);
    expect((await h.call(key, "GET", `${base}/analytics`)).statusCode).toBe(404);

    const physical = (await physicalOf(h, branchId, "facts")).database;
    const deleted = await h.call(key, "DELETE", `${base}/facts`);
    expect(deleted.statusCode).toBe(200);
    expect(deleted.json().database.name).toBe("facts");
    expect(await clusterHas("database", physical)).toBe(false);
  });
});

describe("roles", () => {
  it("are real PostgreSQL roles: created with a password, revealed, reset, deleted", async () => {
    const { projectId, branchId } = await newProject();
    const base = `/projects/${projectId}/branches/${branchId}/roles`;
    const created = await h.call(key, "POST", base, { role: { name: "app" } });
    expect(created.statusCode, created.body).toBe(201);
    const { role } = created.json();
    expect(role).toMatchObject({
      name: "app",
      branch_id: branchId,
      authentication_method: "password",
      password: expect.stringMatching(/^[A-Za-z0-9]{24}$/),
    });
    const { role: physicalRole, database } = await physicalOf(h, branchId, "neondb", "app");
    expect(await canLogin(database, physicalRole, role.password)).toBe(true);
    const app = await connectAs(h, branchId, "neondb", "app");
    expect((await app.query("SELECT current_user AS u")).rows[0].u).toBe(physicalRole);
    await app.end();

    expect((await h.call(key, "POST", base, { role: { name: "app" } })).statusCode).toBe(409);
    expect((await h.call(key, "GET", base)).json().roles.map((r: { name: string }) => r.name)).toEqual([
      "neondb_owner",
      "app",
    ]);
    expect((await h.call(key, "GET", `${base}/app`)).json().role).not.toHaveProperty("password");
    expect((await h.call(key, "GET", `${base}/app/reveal_password`)).json()).toEqual({
      password: role.password,
    });

    const reset = await h.call(key, "POST", `${base}/app/reset_password`);
    expect(reset.statusCode).toBe(200);
    const newPassword = reset.json().role.password;
    expect(newPassword).not.toBe(role.password);
    expect(reset.json().operations[0]).toMatchObject({ action: "apply_config", status: "finished" });
    expect(await canLogin(database, physicalRole, newPassword)).toBe(true);
    expect(await canLogin(database, physicalRole, role.password)).toBe(false);
    expect((await h.call(key, "GET", `${base}/app/reveal_password`)).json().password).toBe(newPassword);

    // a role that owns a database stays; the others go, from the cluster too
    expect((await h.call(key, "DELETE", `${base}/neondb_owner`)).statusCode).toBe(409);
    const deleted = await h.call(key, "DELETE", `${base}/app`);
    expect(deleted.statusCode).toBe(200);
    expect(await clusterHas("role", physicalRole)).toBe(false);
    expect((await h.call(key, "GET", `${base}/app`)).statusCode).toBe(404);
  });

  it("no_login roles have no password; projects that store none refuse to reveal", async () => {
    const { projectId, branchId } = await newProject({ store_passwords: false });
    const base = `/projects/${projectId}/branches/${branchId}/roles`;
    const created = (await h.call(key, "POST", base, { role: { name: "group", no_login: true } })).json();
    expect(created.role.authentication_method).toBe("no_login");
    expect(created.role).not.toHaveProperty("password");
    expect((await h.call(key, "GET", `${base}/group/reveal_password`)).statusCode).toBe(412);
    const refused = await h.call(key, "GET", `${base}/neondb_owner/reveal_password`);
    expect(refused.statusCode).toBe(412);
    expect(refused.json().code).toBe("PRECONDITION_FAILED");
  });

  it("two projects can both have neondb_owner: each is its own PostgreSQL role", async () => {
    const one = await newProject();
    const two = await newProject();
    const [a, b] = [await physicalOf(h, one.branchId), await physicalOf(h, two.branchId)];
    expect(a.role).not.toBe(b.role);
    // random real names: the cluster's other tenants do not see what a project called its roles
    expect([a.role, b.role].every((role) => /^pgtoll_role_[0-9a-f]{16}$/.test(role))).toBe(true);
    expect(one.body.roles[0].name).toBe("neondb_owner");
  });

  it("a branch made after a role was created has it, with the same password", async () => {
    const { projectId, branchId } = await newProject();
    const created = (
      await h.call(key, "POST", `/projects/${projectId}/branches/${branchId}/roles`, {
        role: { name: "reader" },
      })
    ).json();
    const child = (
      await h.call(key, "POST", `/projects/${projectId}/branches`, { branch: { name: "child" } })
    ).json();
    expect(child.roles.map((r: { name: string }) => r.name).sort()).toEqual(["neondb_owner", "reader"]);
    // two roles: no single connection URI
    expect(child).not.toHaveProperty("connection_uris");
    const revealed = await h.call(
      key,
      "GET",
      `/projects/${projectId}/branches/${child.branch.id}/roles/reader/reveal_password`,
    );
    expect(revealed.json().password).toBe(created.role.password);
    const target = await physicalOf(h, child.branch.id, "neondb", "reader");
    expect(await canLogin(target.database, target.role, created.role.password)).toBe(true);
  });
});

describe("a project's paths", () => {
  it("never reach another project's branch: its databases and roles are neither changed nor deleted (404)", async () => {
    const own = await newProject();
    const other = await h.bootstrap();
    const created = await h.call(other.key, "POST", "/projects", { project: { name: "someone else's" } });
    const victim = created.json().branch.id as string;
    const target = await physicalOf(h, victim);
    const base = `/projects/${own.projectId}/branches/${victim}`;
    const attempts: [string, string, object?][] = [
      ["GET", `${base}/databases`],
      ["GET", `${base}/roles/neondb_owner`],
      ["PATCH", `${base}/databases/neondb`, { database: { name: "taken" } }],
      ["DELETE", `${base}/databases/neondb`],
      ["POST", `${base}/roles/neondb_owner/reset_password`],
      ["DELETE", `${base}/roles/neondb_owner`],
    ];
    for (const [method, url, body] of attempts) {
      const response = await h.call(key, method, url, body);
      expect(response.statusCode, `${method} ${url}: ${response.body}`).toBe(404);
    }
    expect(await clusterHas("database", target.database)).toBe(true);
    expect(await canLogin(target.database, target.role, target.password)).toBe(true);
    const databases = await h.call(
      other.key,
      "GET",
      `/projects/${created.json().project.id}/branches/${victim}/databases`,
    );
    expect(databases.json().databases.map((d: { name: string }) => d.name)).toEqual(["neondb"]);
  });
});

describe("connection URIs", () => {
  it("GET /projects/{id}/connection_uri names the endpoint, the role and its password, and the database", async () => {
    const { projectId, body } = await newProject();
    const response = await h.call(
      key,
      "GET",
      `/projects/${projectId}/connection_uri?database_name=neondb&role_name=neondb_owner`,
    );
    expect(response.statusCode, response.body).toBe(200);
    const uri = new URL(response.json().uri);
    const endpoint = body.endpoints[0];
    expect(uri.hostname).toBe(endpoint.host);
    expect(uri.hostname).toBe(`${endpoint.id}.localhost`);
    expect(uri.port).toBe("6543");
    expect(uri.username).toBe("neondb_owner");
    expect(decodeURIComponent(uri.password)).toBe(body.roles[0].password);
    expect(uri.pathname).toBe("/neondb");
    expect(uri.searchParams.get("options")).toBe(`endpoint=${endpoint.id}`);
    expect(body.connection_uris[0].connection_uri).toBe(response.json().uri);
    const pooled = new URL(
      (
        await h.call(
          key,
          "GET",
          `/projects/${projectId}/connection_uri?database_name=neondb&role_name=neondb_owner&pooled=true`,
        )
      ).json().uri,
    );
    expect(pooled.hostname).toBe(`${endpoint.id}-pooler.localhost`);
    expect(
      (
        await h.call(
          key,
          "GET",
          `/projects/${projectId}/connection_uri?database_name=nope&role_name=neondb_owner`,
        )
      ).statusCode,
    ).toBe(404);
    expect(
      (await h.call(key, "GET", `/projects/${projectId}/connection_uri?role_name=neondb_owner`)).statusCode,
    ).toBe(400);
  });
});
