import { execFile } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { TestProxy } from "../support/proxy.js";
import { startEndpointProxy } from "./endpoint-proxy-support.js";
import { type Neonctl, neonctlFor } from "./neonctl-support.js";
import { query } from "./physical.js";
import { type ManagementHarness, startManagement } from "./support.js";

let h: ManagementHarness;
let proxy: TestProxy;
let key: string;
let apiHost: string;
let configDir: string;

beforeAll(async () => {
  h = await startManagement();
  key = (await h.bootstrap()).key;
  const address = await h.app.listen({ host: "127.0.0.1", port: 0 });
  apiHost = `${address}/api/v2`;
  configDir = await mkdtemp(join(tmpdir(), "pgtoll-neonctl-"));
  proxy = await startEndpointProxy(h);
  ({ run: neonctl, json } = neonctlFor(apiHost, key, configDir));
});
afterAll(async () => {
  await proxy?.close();
  await h?.close();
  if (configDir) await rm(configDir, { recursive: true, force: true });
});

let neonctl: Neonctl["run"];
let json: Neonctl["json"];

describe("neonctl (Neon's CLI) against pgtoll", () => {
  it("manages projects, branches of both kinds, databases and roles, and prints a working connection string", async () => {
    const created = await json(["projects", "create", "--name", "from-neonctl"]);
    const projectId = created.project.id as string;
    expect(JSON.stringify(created)).toMatch(/"connection_uri":"postgresql:\/\/neondb_owner:/);
    const [[main], listed] = await Promise.all([
      json(["branches", "list", "--project-id", projectId]),
      json(["projects", "list"]),
    ]);
    expect(main).toMatchObject({ name: "main", default: true });
    expect(listed.projects.map((p: { id: string }) => p.id)).toContain(projectId);
    const mainId = main.id as string;
    await query(
      h,
      mainId,
      "CREATE TABLE notes (id int PRIMARY KEY, body text); INSERT INTO notes VALUES (1, 'from main')",
    );

    const data = await json(["branches", "create", "--project-id", projectId, "--name", "data"]);
    expect(data.branch).toMatchObject({ name: "data", parent_id: mainId, current_state: "ready" });
    const schemaOnly = await json([
      "branches",
      "create",
      "--project-id",
      projectId,
      "--name",
      "shape",
      "--schema-only",
    ]);
    expect(schemaOnly.branch).toMatchObject({ name: "shape", init_source: "schema-only" });
    expect(await query(h, schemaOnly.branch.id, "SELECT count(*)::int AS n FROM notes")).toEqual([{ n: 0 }]);

    const database = await json([
      "databases",
      "create",
      "--project-id",
      projectId,
      "--branch",
      "data",
      "--name",
      "extra",
    ]);
    expect(database).toMatchObject({ name: "extra", owner_name: "neondb_owner" });
    const role = await json([
      "roles",
      "create",
      "--project-id",
      projectId,
      "--branch",
      "data",
      "--name",
      "app",
    ]);
    expect(role).toMatchObject({ name: "app" });
    const [databases, roles, cs] = await Promise.all([
      json(["databases", "list", "--project-id", projectId, "--branch", "data"]),
      json(["roles", "list", "--project-id", projectId, "--branch", "data"]),
      neonctl([
        "connection-string",
        "data",
        "--project-id",
        projectId,
        "--role-name",
        "neondb_owner",
        "--database-name",
        "neondb",
        "--ssl",
        "require",
      ]),
    ]);
    expect(databases.map((d: { name: string }) => d.name)).toEqual(["neondb", "extra"]);
    expect(roles.map((r: { name: string }) => r.name)).toEqual(["neondb_owner", "app"]);

    // the connection string names the data branch's endpoint in its host; psql connects with it through the
    // proxy, which routes on the TLS server name, and finds the parent's data in the data branch. PGHOSTADDR
    // and PGPORT: `ep-….localhost` need not resolve, and this proxy does not listen on 5432.
    expect(cs.code, cs.stderr).toBe(0);
    const uri = cs.stdout.trim();
    const endpointId = new URL(uri).hostname.split(".")[0]!;
    expect(new URL(uri).hostname).toBe(`${endpointId}.localhost`);
    // neonctl asks for SCRAM with channel binding: the proxy offers SCRAM-SHA-256-PLUS on TLS
    expect(new URL(uri).searchParams.get("channel_binding")).toBe("require");
    expect(data.endpoints.map((e: { id: string }) => e.id)).toContain(endpointId);
    expect(await psql(uri, "SELECT body FROM notes")).toBe("from main");
    expect(await psql(uri, "SELECT current_user")).not.toBe("neondb_owner"); // the role's real name upstream
    expect(
      (await neonctl(["roles", "delete", "app", "--project-id", projectId, "--branch", "data"])).code,
    ).toBe(0);
    expect(
      (await neonctl(["databases", "delete", "extra", "--project-id", projectId, "--branch", "data"])).code,
    ).toBe(0);
    expect((await neonctl(["branches", "delete", "shape", "--project-id", projectId])).code).toBe(0);
    expect((await neonctl(["branches", "delete", "data", "--project-id", projectId])).code).toBe(0);
    const left = (await h.call(key, "GET", `/projects/${projectId}/branches`)).json().branches;
    expect(left.map((b: { name: string }) => b.name)).toEqual(["main"]);
    expect((await neonctl(["projects", "delete", projectId])).code).toBe(0);
    expect((await h.call(key, "GET", `/projects/${projectId}`)).statusCode).toBe(404);
  }, 240_000);

  it("branches schema-diff shows what one branch's schema has that the other's lacks", async () => {
    const created = await json(["projects", "create", "--name", "diffing"]);
    const projectId = created.project.id as string;
    const [main] = await json(["branches", "list", "--project-id", projectId]);
    await query(
      h,
      main.id,
      `CREATE TYPE mood AS ENUM ('ok', 'meh');
       CREATE TABLE items (id int GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY, name text NOT NULL, m mood DEFAULT 'ok');
       CREATE TABLE orders (id serial PRIMARY KEY, item_id int REFERENCES items (id), n int CHECK (n > 0));
       CREATE INDEX orders_item_idx ON orders (item_id);
       CREATE VIEW named AS SELECT name FROM items;
       COMMENT ON TABLE items IS 'things';`,
    );
    const dev = await json(["branches", "create", "--project-id", projectId, "--name", "dev"]);
    await query(h, dev.branch.id, "ALTER TABLE items ADD COLUMN price numeric(10,2); DROP VIEW named");

    const diff = await neonctl([
      "branches",
      "schema-diff",
      "main",
      "dev",
      "--project-id",
      projectId,
      "--database",
      "neondb",
    ]);
    expect(diff.code, diff.stderr).toBe(0);
    expect(diff.stdout).toMatch(/^\+ {4}price numeric\(10,2\)$/m);
    expect(diff.stdout).toMatch(/^-CREATE VIEW public\.named AS$/m);
    expect(diff.stdout).not.toMatch(/^[-+].*orders/m);

    const schema = await h.call(
      key,
      "GET",
      `/projects/${projectId}/branches/${main.id}/schema?db_name=neondb`,
    );
    expect(schema.statusCode).toBe(200);
    const sql: string = schema.json().sql;
    for (const expected of [
      "CREATE TYPE public.mood AS ENUM (",
      "    id integer GENERATED BY DEFAULT AS IDENTITY,",
      "    m public.mood DEFAULT 'ok'::public.mood",
      "ADD CONSTRAINT orders_item_id_fkey FOREIGN KEY (item_id) REFERENCES public.items(id);",
      "ADD CONSTRAINT orders_n_check CHECK ((n > 0));",
      "CREATE INDEX orders_item_idx ON public.orders USING btree (item_id);",
      "COMMENT ON TABLE public.items IS 'things';",
    ])
      expect(sql).toContain(expected);
    // The same schema gives the same text; a point in time is refused; the database is required and must exist.
    expect(
      (await h.call(key, "GET", `/projects/${projectId}/branches/${main.id}/schema?db_name=neondb`)).json()
        .sql,
    ).toBe(sql);
    const atLsn = await h.call(
      key,
      "GET",
      `/projects/${projectId}/branches/${main.id}/schema?db_name=neondb&lsn=0/1`,
    );
    expect(atLsn.statusCode).toBe(400);
    expect(atLsn.json().message).toMatch(/keeps no history/);
    expect((await h.call(key, "GET", `/projects/${projectId}/branches/${main.id}/schema`)).statusCode).toBe(
      400,
    );
    expect(
      (await h.call(key, "GET", `/projects/${projectId}/branches/${main.id}/schema?db_name=nope`)).statusCode,
    ).toBe(404);
  }, 120_000);

  it("reports the API's errors", async () => {
    const missing = await neonctl(["projects", "get", "no-such-project-42"]);
    expect(missing.code).not.toBe(0);
    expect(missing.stderr).toMatch(/project no-such-project-42 not found/);
  }, 60_000);
});

/** Runs one query with the system psql, as a user would with the URI neonctl printed. */
function psql(uri: string, sql: string): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(
      "psql",
      [uri, "-X", "-At", "-c", sql],
      { env: { ...process.env, PGHOSTADDR: "127.0.0.1", PGPORT: String(proxy.port) }, timeout: 30_000 },
      (error, stdout, stderr) =>
        error ? reject(new Error(`psql failed: ${stderr}`)) : resolve(stdout.trim()),
    );
  });
}
