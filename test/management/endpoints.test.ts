import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { recordEndpointSession } from "../../src/control/endpoint-session-records.js";
import { passwordMatches, resolveEndpoint } from "../../src/control/resolve-endpoint.js";
import { physicalOf } from "./physical.js";
import { clusterUrl, clusterUrlFor, type ManagementHarness, startManagement } from "./support.js";

let h: ManagementHarness;
let key: string;
beforeAll(async () => {
  h = await startManagement();
  key = (await h.bootstrap()).key;
});
afterAll(async () => {
  await h?.close();
});

const resolve = (endpointId: string, role = "neondb_owner", database = "neondb") =>
  resolveEndpoint(h.meta, h.box, clusterUrl(), endpointId, { role, database });

async function newProject() {
  const body = (await h.call(key, "POST", "/projects", { project: { name: "computes" } })).json();
  return {
    projectId: body.project.id as string,
    branchId: body.branch.id as string,
    endpointId: body.endpoints[0].id as string,
    password: body.roles[0].password as string,
  };
}

describe("endpoints", () => {
  it("are created (one read_write per branch, any number read_only), listed, read, updated and deleted", async () => {
    const { projectId, branchId, endpointId } = await newProject();
    const created = await h.call(key, "POST", `/projects/${projectId}/endpoints`, {
      endpoint: { branch_id: branchId, type: "read_only", name: "reporting", autoscaling_limit_max_cu: 2 },
    });
    expect(created.statusCode, created.body).toBe(201);
    const readOnly = created.json().endpoint;
    expect(readOnly).toMatchObject({
      type: "read_only",
      name: "reporting",
      current_state: "active",
      branch_id: branchId,
      host: `${readOnly.id}.localhost`,
      autoscaling_limit_min_cu: 0.25,
      autoscaling_limit_max_cu: 2,
      region_id: "local",
    });
    expect(created.json().operations).toEqual([
      expect.objectContaining({ action: "start_compute", status: "finished", endpoint_id: readOnly.id }),
    ]);
    const second = await h.call(key, "POST", `/projects/${projectId}/endpoints`, {
      endpoint: { branch_id: branchId, type: "read_write" },
    });
    expect(second.statusCode).toBe(409);

    const all = (await h.call(key, "GET", `/projects/${projectId}/endpoints`))
      .json()
      .endpoints.map((e: { id: string }) => e.id);
    expect(all.sort()).toEqual([endpointId, readOnly.id].sort());
    expect(
      (await h.call(key, "GET", `/projects/${projectId}/branches/${branchId}/endpoints`)).json().endpoints,
    ).toHaveLength(2);
    const updated = await h.call(key, "PATCH", `/projects/${projectId}/endpoints/${readOnly.id}`, {
      endpoint: { name: "bi", suspend_timeout_seconds: 600 },
    });
    expect(updated.json().endpoint).toMatchObject({ name: "bi", suspend_timeout_seconds: 600 });

    const deleted = await h.call(key, "DELETE", `/projects/${projectId}/endpoints/${readOnly.id}`);
    expect(deleted.statusCode).toBe(200);
    expect((await h.call(key, "GET", `/projects/${projectId}/endpoints/${readOnly.id}`)).statusCode).toBe(
      404,
    );
    expect(await resolve(readOnly.id)).toBeNull();
  });

  it("give the proxy the upstream to connect to, the role check and the read-only flag", async () => {
    const { projectId, branchId, endpointId, password } = await newProject();
    const target = await resolve(endpointId);
    expect(target).toMatchObject({
      endpointId,
      projectId,
      branchId,
      type: "read_write",
      readOnly: false,
      state: "active",
      refusal: null,
    });
    expect(passwordMatches(target!, password)).toBe(true);
    expect(passwordMatches(target!, `${password}x`)).toBe(false);
    const physical = await physicalOf(h, branchId);
    expect(target!.upstream).toMatchObject({ database: physical.database, user: physical.role, password });
    const upstream = new pg.Client({ ...target!.upstream! });
    await upstream.connect();
    expect((await upstream.query("SELECT current_database() AS d")).rows[0].d).toBe(physical.database);
    await upstream.end();

    expect((await resolve(endpointId, "nobody"))?.refusal?.reason).toBe("unknown_role");
    expect((await resolve(endpointId, "neondb_owner", "nodb"))?.refusal?.reason).toBe("unknown_database");
    expect(await resolve("ep-does-not-exist-1")).toBeNull();
    const readOnly = (
      await h.call(key, "POST", `/projects/${projectId}/endpoints`, {
        endpoint: { branch_id: branchId, type: "read_only" },
      })
    ).json().endpoint;
    expect((await resolve(readOnly.id))?.readOnly).toBe(true);
  });

  it("suspend ends the endpoint's sessions and refuses new ones with a clear reason until started again", async () => {
    const { projectId, branchId, endpointId } = await newProject();
    const physical = await physicalOf(h, branchId);
    const session = new pg.Client({
      connectionString: clusterUrlFor(physical.database, {
        name: physical.role,
        password: physical.password,
      }),
    });
    const ended = new Promise<Error>((resolveEnded) => session.on("error", resolveEnded));
    await session.connect();
    // Recorded as the wire proxy records the sessions it opens: by the backend, not by a name.
    const { rows } = await session.query("SELECT pg_backend_pid() AS pid");
    const cluster = new pg.Pool({ connectionString: clusterUrl(), max: 1 });
    const recorded = await recordEndpointSession(h.meta, cluster, {
      endpointId,
      projectId,
      branchId,
      physicalRole: physical.role,
      physicalDatabase: physical.database,
      clientAddress: "127.0.0.1",
      backendPid: rows[0].pid,
    }).finally(() => cluster.end());
    expect(recorded).toEqual(expect.any(Number));

    const suspended = await h.call(key, "POST", `/projects/${projectId}/endpoints/${endpointId}/suspend`);
    expect(suspended.statusCode).toBe(200);
    expect(suspended.json().endpoint).toMatchObject({
      current_state: "idle",
      suspended_at: expect.any(String),
    });
    expect(suspended.json().operations).toEqual([
      expect.objectContaining({ action: "suspend_compute", status: "finished" }),
    ]);
    expect((await ended).message).toMatch(/terminat/);
    const refused = await resolve(endpointId);
    expect(refused?.refusal).toEqual({
      reason: "suspended",
      message: expect.stringMatching(/is suspended: start it with POST/),
    });
    expect(refused?.upstream).toBeNull();

    const started = await h.call(key, "POST", `/projects/${projectId}/endpoints/${endpointId}/start`);
    expect(started.json().endpoint.current_state).toBe("active");
    expect((await resolve(endpointId))?.refusal).toBeNull();
    await session.end().catch(() => {});
  });

  it("a disabled endpoint is suspended and cannot be started until enabled", async () => {
    const { projectId, endpointId } = await newProject();
    const disabled = await h.call(key, "PATCH", `/projects/${projectId}/endpoints/${endpointId}`, {
      endpoint: { disabled: true },
    });
    expect(disabled.json().endpoint).toMatchObject({ disabled: true, current_state: "idle" });
    expect((await resolve(endpointId))?.refusal?.reason).toBe("disabled");
    expect(
      (await h.call(key, "POST", `/projects/${projectId}/endpoints/${endpointId}/start`)).statusCode,
    ).toBe(409);
    await h.call(key, "PATCH", `/projects/${projectId}/endpoints/${endpointId}`, {
      endpoint: { disabled: false },
    });
    expect(
      (await h.call(key, "POST", `/projects/${projectId}/endpoints/${endpointId}/start`)).json().endpoint
        .current_state,
    ).toBe("active");
  });
});
