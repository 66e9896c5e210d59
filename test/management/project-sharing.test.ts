import { createApiClient, EndpointType } from "@neondatabase/api-client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ManagementHarness, startManagement } from "./support.js";

let h: ManagementHarness;
let owner: ReturnType<typeof createApiClient>;
let guest: ReturnType<typeof createApiClient>;
let guestEmail: string;
let ownerOrg: string;

beforeAll(async () => {
  h = await startManagement();
  const address = await h.app.listen({ host: "127.0.0.1", port: 0 });
  const first = await h.bootstrap("Owner Org");
  const second = await h.bootstrap();
  ownerOrg = first.orgId!;
  guestEmail = second.email;
  owner = createApiClient({ apiKey: first.key, baseURL: `${address}/api/v2` });
  guest = createApiClient({ apiKey: second.key, baseURL: `${address}/api/v2` });
});
afterAll(async () => {
  await h?.close();
});

type Failure = { status: number; data: { code: string; message: string } };
const failure = (promise: Promise<unknown>): Promise<Failure> =>
  promise.then(
    () => {
      throw new Error("expected a refusal");
    },
    (error: { response: Failure }) => error.response,
  );

describe("sharing a project by email", () => {
  it("gives the user member access: it uses the project but may not delete, share or transfer it; revoked, it is gone", async () => {
    const { data: created } = await owner.createProject({ project: { name: "shared", org_id: ownerOrg } });
    const projectId = created.project.id;
    expect((await failure(guest.getProject(projectId))).status).toBe(404);
    expect((await guest.listSharedProjects({})).data.projects).toEqual([]);

    const { data: grant } = await owner.grantPermissionToProject(projectId, {
      email: guestEmail.toUpperCase(),
    });
    expect(grant).toMatchObject({ id: expect.any(String), granted_to_email: guestEmail.toUpperCase() });
    expect((await failure(owner.grantPermissionToProject(projectId, { email: guestEmail }))).status).toBe(
      409,
    );
    expect((await owner.listProjectPermissions(projectId)).data.project_permissions.map((p) => p.id)).toEqual(
      [grant.id],
    );

    const { data: shared } = await guest.listSharedProjects({});
    expect(shared.projects.map((p) => p.id)).toEqual([projectId]);
    expect((await guest.listProjects({})).data.projects.map((p) => p.id)).not.toContain(projectId);
    expect((await guest.getProject(projectId)).data.project.name).toBe("shared");
    const { data: branch } = await guest.createProjectBranch(projectId, {
      branch: { name: "guest-work" },
      endpoints: [{ type: EndpointType.ReadOnly }],
    });
    expect(branch.branch.name).toBe("guest-work");

    expect((await failure(guest.deleteProject(projectId))).status).toBe(403);
    expect(
      (await failure(guest.grantPermissionToProject(projectId, { email: "x@example.com" }))).status,
    ).toBe(403);
    expect((await failure(guest.listProjectPermissions(projectId))).status).toBe(403);
    const transfer = await failure(
      guest.transferProjectsFromUserToOrg({ destination_org_id: ownerOrg, project_ids: [projectId] }),
    );
    expect(transfer.status).toBeGreaterThanOrEqual(400);

    const { data: revoked } = await owner.revokePermissionFromProject(projectId, grant.id);
    expect(revoked).toMatchObject({ id: grant.id, revoked_at: expect.any(String) });
    expect((await failure(owner.revokePermissionFromProject(projectId, grant.id))).status).toBe(404);
    expect((await failure(guest.getProject(projectId))).status).toBe(404);
    expect((await guest.listSharedProjects({})).data.projects).toEqual([]);
    expect((await owner.listProjectPermissions(projectId)).data.project_permissions).toEqual([]);
  });

  it("refuses an address that is not one, and a project the caller cannot see", async () => {
    const { data: created } = await owner.createProject({ project: { name: "other", org_id: ownerOrg } });
    expect(
      (await failure(owner.grantPermissionToProject(created.project.id, { email: "not an address" }))).status,
    ).toBe(400);
    expect(
      (await failure(guest.grantPermissionToProject(created.project.id, { email: guestEmail }))).status,
    ).toBe(404);
  });
});
