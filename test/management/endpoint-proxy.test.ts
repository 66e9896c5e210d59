import { execFile } from "node:child_process";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { TestProxy } from "../support/proxy.js";
import {
  connectError,
  type EndpointClientOptions,
  type EndpointProject,
  endpointClient as endpointClientOf,
  newEndpointProject,
  startEndpointProxy,
} from "./endpoint-proxy-support.js";
import { type ManagementHarness, startManagement } from "./support.js";

let h: ManagementHarness;
let proxy: TestProxy;
let key: string;

beforeAll(async () => {
  h = await startManagement();
  key = (await h.bootstrap()).key;
  proxy = await startEndpointProxy(h);
});
afterAll(async () => {
  await proxy?.close();
  await h?.close();
});

const newProject = () => newEndpointProject(h, key);
/**
 * psql as a user runs it with the URI the API printed. The endpoint's host name (`ep-….localhost`) need not
 * resolve: PGHOSTADDR gives libpq the address, and the host name still goes out as the TLS server name.
 */
function psql(
  uri: string,
  sql: string,
  env: Record<string, string> = {},
): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      "psql",
      [uri, "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1", "-c", sql],
      { env: { ...process.env, PGHOSTADDR: "127.0.0.1", PGCONNECT_TIMEOUT: "10", ...env }, timeout: 30_000 },
      (error, stdout, stderr) =>
        resolve({ code: error ? Number((error as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

const endpointClient = (endpointId: string | null, password: string, options: EndpointClientOptions = {}) =>
  endpointClientOf(proxy, endpointId, password, options);

describe("the wire proxy routes management API endpoints", () => {
  it("psql connects with the project's connection URI (options=endpoint) and works on the branch database", async () => {
    const project = await newProject();
    expect(project.uri).toContain(`${project.endpointId}.localhost:${proxy.port}/neondb`);
    const made = await psql(
      project.uri,
      "CREATE TABLE notes (id int PRIMARY KEY, body text); INSERT INTO notes VALUES (1, 'hello'); SELECT current_database() <> 'neondb', body FROM notes",
    );
    expect(made.stderr).toBe("");
    expect(made.stdout.trim()).toBe("t|hello");
    // COPY FROM STDIN: the owner's own database is not guarded like an agent's
    const copied = await psql(project.uri, "\\copy notes FROM PROGRAM 'printf \"2\\tcopied\\n\"'");
    expect(copied.code, copied.stderr).toBe(0);
    expect((await psql(project.uri, "SELECT count(*) FROM notes")).stdout.trim()).toBe("2");
  });

  it("routes on the TLS server name alone (SNI), and on Neon's endpoint=<id>;<password> password", async () => {
    const project = await newProject();
    const url = new URL(project.uri);
    url.search = "sslmode=require";
    const bySni = await psql(url.toString(), "SELECT 'sni:' || current_user");
    expect(bySni.stderr).toBe("");
    expect(bySni.stdout.trim()).toMatch(/^sni:/);

    const plain = endpointClient(null, `endpoint=${project.endpointId};${project.password}`);
    await plain.connect();
    expect((await plain.query("SELECT 41 + 1 AS n")).rows).toEqual([{ n: 42 }]);
    await plain.end();
  });

  it("refuses a wrong password, an unknown role or endpoint, a missing endpoint and an unknown database, each clearly", async () => {
    const project = await newProject();
    const wrong = await connectError(endpointClient(project.endpointId, "not-the-password"));
    expect(wrong).toMatchObject({
      code: "28P01",
      message: 'password authentication failed for user "neondb_owner"',
    });
    const nobody = await connectError(
      endpointClient(project.endpointId, project.password, { user: "nobody" }),
    );
    expect(nobody).toMatchObject({
      code: "28P01",
      message: 'password authentication failed for user "nobody"',
    });
    const unknown = await connectError(endpointClient("ep-no-such-endpoint-1", project.password));
    expect(unknown).toMatchObject({
      code: "08004",
      message: "endpoint ep-no-such-endpoint-1 does not exist",
    });
    const missing = await connectError(endpointClient(null, project.password));
    expect(missing.code).toBe("08004");
    expect(missing.message).toMatch(/no endpoint given: .*options=endpoint%3D<endpoint_id>/);
    const noDatabase = await connectError(
      endpointClient(project.endpointId, project.password, { database: "nodb" }),
    );
    expect(noDatabase).toMatchObject({ code: "3D000", message: 'database "nodb" does not exist' });
  });

  it("a suspended endpoint refuses connections and ends its sessions; started again, it serves", async () => {
    const project = await newProject();
    const session = endpointClient(project.endpointId, project.password);
    await session.connect();
    const ended = new Promise<Error>((resolve) => session.on("error", resolve));
    const suspend = await h.call(
      key,
      "POST",
      `/projects/${project.projectId}/endpoints/${project.endpointId}/suspend`,
    );
    expect(suspend.statusCode).toBe(200);
    expect((await ended).message).toMatch(/terminat/);

    const refused = await connectError(endpointClient(project.endpointId, project.password));
    expect(refused.code).toBe("57P03");
    expect(refused.message).toMatch(
      new RegExp(`endpoint ${project.endpointId} is suspended: start it with POST /api/v2/projects/`),
    );
    // the password is checked first: a wrong one learns nothing about the endpoint's state
    expect((await connectError(endpointClient(project.endpointId, "wrong"))).code).toBe("28P01");

    await h.call(key, "POST", `/projects/${project.projectId}/endpoints/${project.endpointId}/start`);
    const again = endpointClient(project.endpointId, project.password);
    await again.connect();
    expect((await again.query("SELECT 1 AS one")).rows).toEqual([{ one: 1 }]);
    await again.end();
  });

  it("records the endpoint's last activity when a client connects", async () => {
    const project = await newProject();
    const path = `/projects/${project.projectId}/endpoints/${project.endpointId}`;
    const before = (await h.call(key, "GET", path)).json().endpoint.last_active;
    const client = endpointClient(project.endpointId, project.password);
    await client.connect();
    await client.end();
    const after = (await h.call(key, "GET", path)).json().endpoint.last_active;
    expect(Date.parse(after)).toBeGreaterThan(Date.parse(before ?? "1970-01-01"));
  });
});

describe("a read-only endpoint", () => {
  let project: EndpointProject;
  let readOnlyId: string;

  beforeAll(async () => {
    project = await newProject();
    const writer = endpointClient(project.endpointId, project.password);
    await writer.connect();
    await writer.query(`CREATE TABLE items (id int PRIMARY KEY, name text);
      INSERT INTO items VALUES (1, 'one'), (2, 'two');
      CREATE SEQUENCE counter;
      CREATE FUNCTION go_read_write() RETURNS text LANGUAGE sql
        AS $$ SELECT set_config('default_transaction_read_only', 'off', false) $$`);
    await writer.end();
    const created = await h.call(key, "POST", `/projects/${project.projectId}/endpoints`, {
      endpoint: { branch_id: project.branchId, type: "read_only" },
    });
    readOnlyId = created.json().endpoint.id;
  });

  it("serves reads and refuses every write with SQLSTATE 25006, the session going on", async () => {
    const client = endpointClient(readOnlyId, project.password);
    await client.connect();
    expect((await client.query("SELECT name FROM items ORDER BY id")).rows).toEqual([
      { name: "one" },
      { name: "two" },
    ]);
    for (const write of [
      "INSERT INTO items VALUES (3, 'three')",
      "UPDATE items SET name = 'x' WHERE id = 1",
      "CREATE TABLE other (id int)",
      "SELECT nextval('counter')",
    ]) {
      await expect(client.query(write), write).rejects.toMatchObject({ code: "25006" });
    }
    // ways to turn read-only off are refused by the proxy, with its own message
    for (const switchOff of [
      "SET default_transaction_read_only = off",
      "SET SESSION CHARACTERISTICS AS TRANSACTION READ WRITE",
      "BEGIN READ WRITE",
      "START TRANSACTION ISOLATION LEVEL SERIALIZABLE, READ WRITE",
      "SELECT set_config('default_transaction_read_only', 'off', false)",
      "DO $$ BEGIN SET default_transaction_read_only = off; END $$",
      "SET standard_conforming_strings = off",
    ]) {
      await expect(client.query(switchOff), switchOff).rejects.toMatchObject({
        code: "25006",
        message: expect.stringMatching(/read-only/),
      });
    }
    // extended protocol too
    await expect(
      client.query("SELECT set_config($1, $2, false)", ["default_transaction_read_only", "off"]),
    ).rejects.toMatchObject({ code: "25006" });
    // a refused statement inside a transaction aborts it, as PostgreSQL would
    await client.query("BEGIN");
    await expect(client.query("SET transaction_read_only = off")).rejects.toMatchObject({ code: "25006" });
    await expect(client.query("SELECT 1")).rejects.toMatchObject({ code: "25P02" });
    await client.query("ROLLBACK");
    // RESET goes back to the connect-time value: still read-only
    await client.query("RESET ALL");
    expect((await client.query("SHOW transaction_read_only")).rows).toEqual([
      { transaction_read_only: "on" },
    ]);
    await expect(client.query("DELETE FROM items WHERE id = 1")).rejects.toMatchObject({ code: "25006" });
    await client.end();

    const writer = endpointClient(project.endpointId, project.password);
    await writer.connect();
    expect((await writer.query("SELECT count(*)::int AS n FROM items")).rows).toEqual([{ n: 2 }]);
    await writer.end();
  });

  it("passes large values through as they arrive, and screens the messages after them", async () => {
    const client = endpointClient(readOnlyId, project.password);
    await client.connect();
    const { rows } = await client.query(
      "SELECT g, repeat(chr(64 + g), 300000 * g) AS v FROM generate_series(1, 3) g UNION ALL SELECT 4, repeat('z', 20000000)",
    );
    expect(rows.map((row) => [row.g, row.v.length, row.v[0]])).toEqual([
      [1, 300_000, "A"],
      [2, 600_000, "B"],
      [3, 900_000, "C"],
      [4, 20_000_000, "z"],
    ]);
    const copied = await client.query(
      "SELECT string_agg(v, '') AS v FROM (SELECT repeat('y', 100000) AS v FROM generate_series(1, 5)) s",
    );
    expect(copied.rows[0].v).toHaveLength(500_000);
    // The refusal that follows is still the proxy's own.
    await expect(client.query("INSERT INTO items VALUES (9, 'nine')")).rejects.toMatchObject({
      code: "25006",
    });
    await client.end();
  });

  it("refuses read-write settings at connect time", async () => {
    const refused = await connectError(
      endpointClient(readOnlyId, project.password, {
        options: `endpoint=${readOnlyId} -c default_transaction_read_only=off`,
      }),
    );
    expect(refused.code).toBe("25006");
  });

  it("closes a session that a function switched to read-write, before anything else runs", async () => {
    const client = endpointClient(readOnlyId, project.password);
    const closed = new Promise<Error>((resolve) => client.on("error", resolve));
    await client.connect();
    const error = await client.query("SELECT go_read_write()").then(
      () => null,
      (failure: Error) => failure,
    );
    expect(error).toMatchObject({
      code: "25006",
      message: expect.stringMatching(/is read-only: the session was switched/),
    });
    await closed;
    const writer = endpointClient(project.endpointId, project.password);
    await writer.connect();
    expect((await writer.query("SELECT count(*)::int AS n FROM items")).rows).toEqual([{ n: 2 }]);
    await writer.end();
  });
});
