import { createApiClient, EndpointType } from "@neondatabase/api-client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ManagementHarness, startManagement } from "./support.js";

let h: ManagementHarness;
let api: ReturnType<typeof createApiClient>;
let orgId: string;

beforeAll(async () => {
  h = await startManagement();
  const account = await h.bootstrap("Client Org");
  orgId = account.orgId!;
  const address = await h.app.listen({ host: "127.0.0.1", port: 0 });
  api = createApiClient({ apiKey: account.key, baseURL: `${address}/api/v2` });
});
afterAll(async () => {
  await h?.close();
});

describe("@neondatabase/api-client against pgtoll", () => {
  it("drives projects, branches, endpoints, roles, databases and operations", async () => {
    const { data: created, status } = await api.createProject({ project: { name: "sdk", org_id: orgId } });
    expect(status).toBe(201);
    const projectId = created.project.id;
    expect(created.connection_uris[0]!.connection_uri).toContain(created.endpoints[0]!.host);

    const { data: list } = await api.listProjects({ limit: 10, org_id: orgId });
    expect(list.projects.map((p) => p.id)).toContain(projectId);
    const { data: one } = await api.getProject(projectId);
    expect(one.project).toMatchObject({ id: projectId, name: "sdk", org_id: orgId });

    const { data: branch } = await api.createProjectBranch(projectId, {
      branch: { name: "feature", init_source: "schema-only" },
      endpoints: [{ type: EndpointType.ReadWrite }],
    });
    expect(branch.branch).toMatchObject({
      name: "feature",
      init_source: "schema-only",
      current_state: "ready",
    });
    expect(branch.endpoints?.[0]).toMatchObject({ type: "read_write", current_state: "active" });
    const { data: branches } = await api.listProjectBranches({ projectId });
    expect(branches.branches.map((b) => b.name).sort()).toEqual(["feature", "main"]);

    const { data: role } = await api.createProjectBranchRole(projectId, branch.branch.id, {
      role: { name: "writer" },
    });
    expect(role.role.password).toBeTruthy();
    const { data: revealed } = await api.getProjectBranchRolePassword(projectId, branch.branch.id, "writer");
    expect(revealed.password).toBe(role.role.password);
    const { data: reset } = await api.resetProjectBranchRolePassword(projectId, branch.branch.id, "writer");
    expect(reset.role.password).not.toBe(role.role.password);
    const { data: database } = await api.createProjectBranchDatabase(projectId, branch.branch.id, {
      database: { name: "reports", owner_name: "writer" },
    });
    expect(database.database).toMatchObject({ name: "reports", owner_name: "writer" });
    const { data: uri } = await api.getConnectionUri({
      projectId,
      branch_id: branch.branch.id,
      database_name: "reports",
      role_name: "writer",
    });
    expect(decodeURIComponent(new URL(uri.uri).password)).toBe(reset.role.password);

    const endpointId = branch.endpoints![0]!.id;
    const { data: suspended } = await api.suspendProjectEndpoint(projectId, endpointId);
    expect(suspended.endpoint.current_state).toBe("idle");
    const { data: started } = await api.startProjectEndpoint(projectId, endpointId);
    expect(started.endpoint.current_state).toBe("active");
    const { data: endpoints } = await api.listProjectEndpoints(projectId);
    expect(endpoints.endpoints).toHaveLength(2);

    const { data: operations } = await api.listProjectOperations({ projectId, limit: 100 });
    expect(operations.operations.length).toBeGreaterThanOrEqual(8);
    expect(operations.operations.every((op) => op.status === "finished")).toBe(true);
    const { data: operation } = await api.getProjectOperation(projectId, operations.operations[0]!.id);
    expect(operation.operation.id).toBe(operations.operations[0]!.id);

    const { data: deletedBranch } = await api.deleteProjectBranch({ projectId, branchId: branch.branch.id });
    expect(deletedBranch.branch.id).toBe(branch.branch.id);
    const { data: deleted } = await api.deleteProject(projectId);
    expect(deleted.project.id).toBe(projectId);
  });

  it("manages API keys and reports errors as {code, message}", async () => {
    const { data: key } = await api.createApiKey({ key_name: "sdk" });
    expect(key).toMatchObject({ name: "sdk", key: expect.any(String) });
    const { data: keys } = await api.listApiKeys();
    expect(keys.map((k) => k.id)).toContain(key.id);
    const { data: orgKey } = await api.createOrgApiKey(orgId, { key_name: "org" });
    const { data: orgKeys } = await api.listOrgApiKeys(orgId);
    expect(orgKeys.map((k) => k.id)).toContain(orgKey.id);
    expect((await api.revokeOrgApiKey(orgId, orgKey.id)).data.revoked).toBe(true);
    expect((await api.revokeApiKey(key.id)).data.revoked).toBe(true);

    const failure = await api
      .getProject("no-such-project-7")
      .catch((error: { response: { status: number; data: unknown } }) => error.response);
    expect(failure.status).toBe(404);
    expect(failure.data).toMatchObject({ code: "NOT_FOUND", message: expect.any(String) });
    const { data: me } = await api.getCurrentUserInfo();
    expect(me.email).toMatch(/@example\.com$/);
    const { data: orgs } = await api.getCurrentUserOrganizations();
    expect(orgs.organizations.map((o) => o.id)).toEqual([orgId]);
  });

  it("answers GET /auth for a personal and an organization key, and GET /regions with this installation's region", async () => {
    const { data: auth } = await api.getAuthDetails();
    expect(auth).toMatchObject({ account_id: expect.any(String), auth_method: "api_key_user" });
    const { data: me } = await api.getCurrentUserInfo();
    expect(auth.account_id).toBe(me.id);
    const { data: orgKey } = await api.createOrgApiKey(orgId, { key_name: "auth" });
    const asOrg = createApiClient({ apiKey: orgKey.key, baseURL: api.instance.defaults.baseURL! });
    expect((await asOrg.getAuthDetails()).data).toEqual({
      account_id: orgId,
      auth_method: "api_key_org",
      auth_data: String(orgKey.id),
    });

    const { data: regions } = await api.getActiveRegions({ org_id: orgId });
    expect(regions.regions).toEqual([
      {
        region_id: "local",
        name: expect.stringContaining("local"),
        default: true,
        geo_lat: "",
        geo_long: "",
      },
    ]);
    const { data: created } = await api.createProject({
      project: { name: "in the listed region", org_id: orgId, region_id: regions.regions[0]!.region_id },
    });
    expect(created.project.region_id).toBe(regions.regions[0]!.region_id);
  });
});

describe("where Neon's shapes meet what pgtoll has", () => {
  type Failure = { status: number; data: { code: string; message: string } };
  const failure = (promise: Promise<unknown>) =>
    promise.then(
      () => {
        throw new Error("expected a refusal");
      },
      (error: { response: Failure }) => error.response,
    );

  it("history_retention_seconds is 0 and only 0; passwordless_access is refused; a second read_write endpoint is 409; a foreign region names this one", async () => {
    const refusedRetention = await failure(
      api.createProject({ project: { name: "h", org_id: orgId, history_retention_seconds: 3600 } }),
    );
    expect(refusedRetention).toMatchObject({
      status: 400,
      data: { message: expect.stringMatching(/history_retention_seconds must be 0, got 3600/) },
    });
    const { data: created } = await api.createProject({
      project: { name: "h", org_id: orgId, history_retention_seconds: 0 },
    });
    expect(created.project.history_retention_seconds).toBe(0);
    const projectId = created.project.id;
    expect(
      await failure(api.updateProject(projectId, { project: { history_retention_seconds: 86400 } })),
    ).toMatchObject({ status: 400 });
    expect((await api.getProject(projectId)).data.project.history_retention_seconds).toBe(0);

    const branchId = created.branch.id;
    const passwordless = await failure(
      api.createProjectEndpoint(projectId, {
        endpoint: { branch_id: branchId, type: EndpointType.ReadOnly, passwordless_access: true },
      }),
    );
    expect(passwordless).toMatchObject({
      status: 400,
      data: { message: expect.stringMatching(/passwordless_access is not available/) },
    });
    const endpointId = created.endpoints[0]!.id;
    expect(
      await failure(
        api.updateProjectEndpoint(projectId, endpointId, { endpoint: { passwordless_access: true } }),
      ),
    ).toMatchObject({ status: 400 });

    const twoWriters = await failure(
      api.createProjectBranch(projectId, {
        branch: { name: "two" },
        endpoints: [{ type: EndpointType.ReadWrite }, { type: EndpointType.ReadWrite }],
      }),
    );
    expect(twoWriters).toMatchObject({ status: 409, data: { code: "CONFLICT" } });

    const foreign = await failure(
      api.createProject({ project: { name: "r", org_id: orgId, region_id: "aws-us-east-2" } }),
    );
    expect(foreign).toMatchObject({
      status: 400,
      data: { message: "region aws-us-east-2 is not available: this installation's region is local" },
    });
  });
});

describe("form-encoded bodies", () => {
  it("are accepted as the spec says, with values converted to the schema's types", async () => {
    const { key } = await h.bootstrap();
    const response = await h.app.inject({
      method: "POST",
      url: "/api/v2/projects",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/x-www-form-urlencoded" },
      payload: "project[name]=formed&project[store_passwords]=false&project[history_retention_seconds]=0",
    });
    expect(response.statusCode, response.body).toBe(201);
    expect(response.json().project).toMatchObject({ name: "formed", store_passwords: false });
    const other = await h.app.inject({
      method: "POST",
      url: "/api/v2/api_keys",
      headers: { authorization: `Bearer ${key}`, "content-type": "text/csv" },
      payload: "a,b",
    });
    expect(other.statusCode).toBe(415);
    expect(other.json().code).toBe("UNSUPPORTED_MEDIA_TYPE");
  });
});
