import { execFile } from "node:child_process";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { TestProxy } from "../support/proxy.js";
import {
  connectError,
  type EndpointProject,
  endpointClient,
  expectAlive,
  expectEnded,
  newEndpointProject,
  renamedSession,
  startEndpointProxy,
} from "./endpoint-proxy-support.js";
import { connectAs } from "./physical.js";
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

async function ok(method: string, path: string, body?: unknown) {
  const res = await h.call(key, method, path, body);
  expect(res.statusCode, res.body).toBeLessThan(300);
  for (const operation of res.json().operations ?? []) expect(operation.status).toBe("finished");
  return res.json();
}

function psqlApplicationName(uri: string, env: Record<string, string>): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(
      "psql",
      [uri, "-X", "-At", "-c", "SHOW application_name"],
      { env: { ...process.env, PGHOSTADDR: "127.0.0.1", PGCONNECT_TIMEOUT: "10", ...env }, timeout: 30_000 },
      (error, stdout, stderr) =>
        error ? reject(new Error(stderr || error.message)) : resolve(stdout.trim()),
    );
  });
}

describe("an endpoint session keeps the client's application_name", () => {
  let project: EndpointProject;
  beforeAll(async () => {
    project = await newProject();
  });

  const shown = async (options: Parameters<typeof endpointClient>[3]) => {
    const client = endpointClient(proxy, project.endpointId, project.password, options);
    await client.connect();
    try {
      const { rows } = await client.query(
        "SELECT current_setting('application_name') AS setting, (SELECT application_name FROM pg_stat_activity WHERE pid = pg_backend_pid()) AS activity",
      );
      return rows[0];
    } finally {
      await client.end();
    }
  };

  it("as the startup parameter, fallback_application_name, or -c in options", async () => {
    expect(await shown({ application_name: "orders-service" })).toEqual({
      setting: "orders-service",
      activity: "orders-service",
    });
    expect(await shown({ fallback_application_name: "fallback-app" })).toMatchObject({
      setting: "fallback-app",
    });
    expect(
      await shown({ options: `endpoint=${project.endpointId} -c application_name=from-options` }),
    ).toMatchObject({ setting: "from-options" });
    expect(await shown({})).toMatchObject({ setting: "" });
  });

  it("psql's own name, and PGAPPNAME", async () => {
    expect(await psqlApplicationName(project.uri, {})).toBe("psql");
    expect(await psqlApplicationName(project.uri, { PGAPPNAME: "nightly-report" })).toBe("nightly-report");
  });
});

describe("every session of an endpoint ends when access is taken away, renamed or not", () => {
  it("on suspend: a renamed session is ended, and new ones are refused with 57P03", async () => {
    const project = await newProject();
    const renamed = await renamedSession(proxy, project.endpointId, project.password);
    await ok("POST", `/projects/${project.projectId}/endpoints/${project.endpointId}/suspend`);
    await expectEnded(renamed);
    const refused = await connectError(endpointClient(proxy, project.endpointId, project.password));
    expect(refused.code).toBe("57P03");
  });

  it("on disable and on delete", async () => {
    const project = await newProject();
    const path = `/projects/${project.projectId}/endpoints/${project.endpointId}`;
    const disabledOne = await renamedSession(proxy, project.endpointId, project.password);
    await ok("PATCH", path, { endpoint: { disabled: true } });
    await expectEnded(disabledOne);
    await ok("PATCH", path, { endpoint: { disabled: false } });
    await ok("POST", `${path}/start`);

    const deletedOne = await renamedSession(proxy, project.endpointId, project.password);
    await ok("DELETE", path);
    await expectEnded(deletedOne);
  });

  it("on a role's password reset: every session of the role, and none of another role", async () => {
    const project = await newProject();
    const rolesPath = `/projects/${project.projectId}/branches/${project.branchId}/roles`;
    const other = await ok("POST", rolesPath, { role: { name: "reporting" } });
    const bystander = await renamedSession(proxy, project.endpointId, other.role.password, {
      user: "reporting",
    });
    const renamed = await renamedSession(proxy, project.endpointId, project.password);
    // A session opened on the cluster itself, not through the proxy, is the role's too.
    const direct = await connectAs(h, project.branchId);
    await direct.query("SET application_name = 'direct'");

    const reset = await ok("POST", `${rolesPath}/neondb_owner/reset_password`);
    await expectEnded(renamed);
    await expectEnded(direct);
    await expectAlive(bystander);
    await bystander.end();
    expect((await connectError(endpointClient(proxy, project.endpointId, project.password))).code).toBe(
      "28P01",
    );
    const fresh = endpointClient(proxy, project.endpointId, reset.role.password);
    await fresh.connect();
    await expectAlive(fresh);
    await fresh.end();
  });

  it("on a role's deletion", async () => {
    const project = await newProject();
    const rolesPath = `/projects/${project.projectId}/branches/${project.branchId}/roles`;
    const created = await ok("POST", rolesPath, { role: { name: "app" } });
    const renamed = await renamedSession(proxy, project.endpointId, created.role.password, { user: "app" });
    await ok("DELETE", `${rolesPath}/app`);
    await expectEnded(renamed);
  });

  it("on a restore, also when the branch's previous state is preserved under another name", async () => {
    const project = await newProject();
    const child = await ok("POST", `/projects/${project.projectId}/branches`, {
      branch: { name: "dev", parent_id: project.branchId },
      endpoints: [{ type: "read_write" }],
    });
    const childEndpoint = child.endpoints[0].id as string;
    const restore = (preserve?: string) =>
      ok("POST", `/projects/${project.projectId}/branches/${child.branch.id}/restore`, {
        source_branch_id: project.branchId,
        ...(preserve ? { preserve_under_name: preserve } : {}),
      });

    const preserved = await renamedSession(proxy, childEndpoint, project.password);
    await restore("dev-before");
    await expectEnded(preserved);

    const reset = await renamedSession(proxy, childEndpoint, project.password);
    await restore();
    await expectEnded(reset);
  });
});
