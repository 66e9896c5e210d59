import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { addMember } from "../../src/control/organizations.js";
import { createUser } from "../../src/control/users.js";
import { type ManagementHarness, startManagement } from "./support.js";

let h: ManagementHarness;
beforeAll(async () => {
  h = await startManagement();
});
afterAll(async () => {
  await h?.close();
});

/** A second user, member of `orgId` with `role`, and that user's personal key. */
async function member(orgId: string, role: "admin" | "member") {
  const user = await createUser(h.meta, `${Math.random().toString(36).slice(2)}@example.com`);
  await addMember(h.meta, orgId, user.id, role);
  const { createPersonalKey } = await import("../../src/control/api-keys.js");
  const { token } = await createPersonalKey(h.meta, user.id, "member key");
  const memberId = (
    await h.meta.query("SELECT id FROM organization_members WHERE org_id = $1 AND user_id = $2", [
      orgId,
      user.id,
    ])
  ).rows[0].id;
  return { key: token, userId: user.id, memberId: memberId as string };
}

async function createProject(key: string, orgId?: string) {
  const response = await h.call(key, "POST", "/projects", {
    project: { name: "p", ...(orgId ? { org_id: orgId } : {}) },
  });
  expect(response.statusCode, response.body).toBe(201);
  return response.json().project.id as string;
}

describe("authentication (spec rules 1, 2)", () => {
  it("answers 401 {code, message} without a key, with a malformed header, and with an unknown key", async () => {
    for (const [key, header] of [
      [null, undefined],
      ["x", "Basic abc"],
      ["not-a-key", undefined],
    ] as const) {
      const response = await h.app.inject({
        method: "GET",
        url: "/api/v2/projects",
        headers: header ? { authorization: header } : key ? { authorization: `Bearer ${key}` } : {},
      });
      expect(response.statusCode).toBe(401);
      expect(response.json()).toMatchObject({ code: "UNAUTHORIZED", message: expect.any(String) });
    }
  });

  it("answers unknown routes with a {code, message} 404", async () => {
    const { key } = await h.bootstrap();
    const response = await h.call(key, "GET", "/no/such/route");
    expect(response.statusCode).toBe(404);
    expect(response.json()).toMatchObject({ code: "NOT_FOUND" });
  });
});

describe("personal keys", () => {
  it("are created with a personal key, shown once, listed without their secret, and revoked for good", async () => {
    const { key, userId } = await h.bootstrap();
    const created = await h.call(key, "POST", "/api_keys", { key_name: "ci" });
    expect(created.statusCode).toBe(200);
    const record = created.json();
    expect(Object.keys(record).sort()).toEqual(["created_at", "created_by", "id", "key", "name"]);
    expect(record).toMatchObject({
      id: expect.any(Number),
      key: expect.stringMatching(/^[a-z0-9]{64}$/),
      name: "ci",
      created_by: userId,
    });

    // the new key works, and its use is recorded
    expect((await h.call(record.key, "GET", "/api_keys")).statusCode).toBe(200);
    const listed = (await h.call(key, "GET", "/api_keys")).json();
    expect(listed.map((k: { id: number }) => k.id)).toContain(record.id);
    const item = listed.find((k: { id: number }) => k.id === record.id);
    expect(item).not.toHaveProperty("key");
    expect(JSON.stringify(listed)).not.toContain(record.key);
    expect(item).toMatchObject({ name: "ci", created_by: { id: userId }, last_used_from_addr: "127.0.0.1" });
    expect(Date.parse(item.last_used_at)).toBeGreaterThan(Date.now() - 60_000);
    const stored = await h.meta.query("SELECT token_hash FROM api_keys WHERE id = $1", [record.id]);
    expect(stored.rows[0].token_hash.toString("utf8")).not.toContain(record.key);

    const revoked = await h.call(key, "DELETE", `/api_keys/${record.id}`);
    expect(revoked.statusCode).toBe(200);
    expect(revoked.json()).toMatchObject({
      id: record.id,
      name: "ci",
      revoked: true,
      last_used_from_addr: "127.0.0.1",
    });
    expect(revoked.json().last_used_at).toBe(item.last_used_at);
    // the next request with the revoked key fails, and it is no longer listed
    expect((await h.call(record.key, "GET", "/api_keys")).statusCode).toBe(401);
    expect((await h.call(key, "GET", "/api_keys")).json().map((k: { id: number }) => k.id)).not.toContain(
      record.id,
    );
  });

  it("can be revoked only by their owner (another user gets 404)", async () => {
    const alice = await h.bootstrap();
    const bob = await h.bootstrap();
    const aliceKey = (await h.call(alice.key, "POST", "/api_keys", { key_name: "a" })).json();
    expect((await h.call(bob.key, "DELETE", `/api_keys/${aliceKey.id}`)).statusCode).toBe(404);
    expect((await h.call(aliceKey.key, "GET", "/api_keys")).statusCode).toBe(200);
  });

  it("refuse a missing key_name", async () => {
    const { key } = await h.bootstrap();
    const response = await h.call(key, "POST", "/api_keys", {});
    expect(response.statusCode).toBe(400);
    expect(response.json().code).toBe("BAD_REQUEST");
  });
});

describe("organization and project-scoped keys", () => {
  it("organization keys: administrators create them with a personal key; members get 403, outsiders 404", async () => {
    const admin = await h.bootstrap("Org A");
    const orgId = admin.orgId!;
    const created = await h.call(admin.key, "POST", `/organizations/${orgId}/api_keys`, {
      key_name: "deploy",
    });
    expect(created.statusCode).toBe(200);
    expect(created.json()).toMatchObject({
      name: "deploy",
      created_by: admin.userId,
      created_at: expect.any(String),
    });
    expect(created.json()).not.toHaveProperty("project_id");

    const plain = await member(orgId, "member");
    expect(
      (await h.call(plain.key, "POST", `/organizations/${orgId}/api_keys`, { key_name: "x" })).statusCode,
    ).toBe(403);
    const outsider = await h.bootstrap();
    expect(
      (await h.call(outsider.key, "POST", `/organizations/${orgId}/api_keys`, { key_name: "x" })).statusCode,
    ).toBe(404);
    // an organization key is not a personal key: it cannot mint keys
    const orgKey = created.json().key;
    expect(
      (await h.call(orgKey, "POST", `/organizations/${orgId}/api_keys`, { key_name: "x" })).statusCode,
    ).toBe(403);
    expect((await h.call(orgKey, "POST", "/api_keys", { key_name: "x" })).statusCode).toBe(403);
  });

  it("organization keys reach every project of their organization with admin-level access", async () => {
    const admin = await h.bootstrap("Org B");
    const orgId = admin.orgId!;
    const projectId = await createProject(admin.key, orgId);
    const personal = await createProject(admin.key);
    const orgKey = (
      await h.call(admin.key, "POST", `/organizations/${orgId}/api_keys`, { key_name: "k" })
    ).json().key;
    const listed = (await h.call(orgKey, "GET", "/projects"))
      .json()
      .projects.map((p: { id: string }) => p.id);
    expect(listed).toEqual([projectId]);
    expect((await h.call(orgKey, "GET", `/projects/${personal}`)).statusCode).toBe(404);
    const own = await createProject(orgKey);
    expect((await h.call(admin.key, "GET", `/projects/${own}`)).json().project.org_id).toBe(orgId);
    expect((await h.call(orgKey, "DELETE", `/projects/${own}`)).statusCode).toBe(200);
  });

  it("project-scoped keys: any member creates them for an organization project; they reach that project only", async () => {
    const admin = await h.bootstrap("Org C");
    const orgId = admin.orgId!;
    const plain = await member(orgId, "member");
    const projectId = await createProject(admin.key, orgId);
    const otherProject = await createProject(admin.key, orgId);
    const personalProject = await createProject(plain.key);

    // the project must belong to the organization
    expect(
      (
        await h.call(plain.key, "POST", `/organizations/${orgId}/api_keys`, {
          key_name: "x",
          project_id: personalProject,
        })
      ).statusCode,
    ).toBe(404);
    const created = await h.call(plain.key, "POST", `/organizations/${orgId}/api_keys`, {
      key_name: "scoped",
      project_id: projectId,
    });
    expect(created.statusCode).toBe(200);
    expect(created.json()).toMatchObject({ name: "scoped", project_id: projectId, created_by: plain.userId });
    const scoped = created.json().key;

    expect(
      (await h.call(scoped, "GET", "/projects")).json().projects.map((p: { id: string }) => p.id),
    ).toEqual([projectId]);
    expect((await h.call(scoped, "GET", `/projects/${projectId}`)).statusCode).toBe(200);
    expect((await h.call(scoped, "GET", `/projects/${otherProject}`)).statusCode).toBe(404);
    expect(
      (await h.call(scoped, "PATCH", `/projects/${projectId}`, { project: { name: "renamed" } })).statusCode,
    ).toBe(200);
    // no project creation, no deleting its own project, no organization actions, no keys
    expect((await h.call(scoped, "POST", "/projects", { project: {} })).statusCode).toBe(403);
    expect((await h.call(scoped, "DELETE", `/projects/${projectId}`)).statusCode).toBe(403);
    expect((await h.call(scoped, "GET", `/organizations/${orgId}`)).statusCode).toBe(403);
    expect((await h.call(scoped, "GET", `/organizations/${orgId}/api_keys`)).statusCode).toBe(403);
    expect(
      (await h.call(scoped, "POST", `/organizations/${orgId}/api_keys`, { key_name: "x" })).statusCode,
    ).toBe(403);
    expect((await h.call(scoped, "POST", "/api_keys", { key_name: "x" })).statusCode).toBe(403);
    expect((await h.call(admin.key, "GET", `/projects/${projectId}`)).json().project.name).toBe("renamed");
  });

  it("are listed and revoked by administrators only; revocation takes effect on the next request", async () => {
    const admin = await h.bootstrap("Org D");
    const orgId = admin.orgId!;
    const plain = await member(orgId, "member");
    const projectId = await createProject(admin.key, orgId);
    const orgKey = (
      await h.call(admin.key, "POST", `/organizations/${orgId}/api_keys`, { key_name: "org" })
    ).json();
    const scoped = (
      await h.call(plain.key, "POST", `/organizations/${orgId}/api_keys`, {
        key_name: "scoped",
        project_id: projectId,
      })
    ).json();

    expect((await h.call(plain.key, "GET", `/organizations/${orgId}/api_keys`)).statusCode).toBe(403);
    const listed = (await h.call(admin.key, "GET", `/organizations/${orgId}/api_keys`)).json();
    expect(listed.map((k: { name: string }) => k.name).sort()).toEqual(["org", "scoped"]);
    expect(listed.find((k: { name: string }) => k.name === "scoped").project_id).toBe(projectId);

    for (const key of [orgKey, scoped]) {
      expect((await h.call(key.key, "GET", "/projects")).statusCode).toBe(200);
      expect(
        (await h.call(plain.key, "DELETE", `/organizations/${orgId}/api_keys/${key.id}`)).statusCode,
      ).toBe(403);
      const revoked = await h.call(admin.key, "DELETE", `/organizations/${orgId}/api_keys/${key.id}`);
      expect(revoked.statusCode).toBe(200);
      expect(revoked.json()).toMatchObject({ id: key.id, revoked: true });
      expect((await h.call(key.key, "GET", "/projects")).statusCode).toBe(401);
    }
    // a personal key is not an organization key: the organization route does not find it
    const personal = (await h.call(admin.key, "POST", "/api_keys", { key_name: "mine" })).json();
    expect(
      (await h.call(admin.key, "DELETE", `/organizations/${orgId}/api_keys/${personal.id}`)).statusCode,
    ).toBe(404);
  });
});

describe("membership and ownership changes", () => {
  it("a member who leaves the organization loses its projects through a personal key, which keeps working", async () => {
    const admin = await h.bootstrap("Org E");
    const orgId = admin.orgId!;
    const leaver = await member(orgId, "member");
    const projectId = await createProject(admin.key, orgId);
    expect((await h.call(leaver.key, "GET", `/projects/${projectId}`)).statusCode).toBe(200);

    const left = await h.call(leaver.key, "DELETE", `/organizations/${orgId}/members/${leaver.memberId}`);
    expect(left.statusCode).toBe(200);
    expect((await h.call(leaver.key, "GET", `/projects/${projectId}`)).statusCode).toBe(404);
    expect((await h.call(leaver.key, "GET", "/projects")).json().projects).toEqual([]);
    expect((await h.call(leaver.key, "GET", `/organizations/${orgId}`)).statusCode).toBe(404);
    expect((await h.call(leaver.key, "GET", "/api_keys")).statusCode).toBe(200);
  });

  it("an administrator removes a member; members cannot remove others; the last admin cannot leave", async () => {
    const admin = await h.bootstrap("Org F");
    const orgId = admin.orgId!;
    const a = await member(orgId, "member");
    const b = await member(orgId, "member");
    expect((await h.call(a.key, "DELETE", `/organizations/${orgId}/members/${b.memberId}`)).statusCode).toBe(
      403,
    );
    expect(
      (await h.call(admin.key, "DELETE", `/organizations/${orgId}/members/${b.memberId}`)).statusCode,
    ).toBe(200);
    const members = (await h.call(admin.key, "GET", `/organizations/${orgId}/members`)).json().members;
    expect(members.map((m: { user: { email: string } }) => m.user.email)).toHaveLength(2);
    const adminMember = members.find(
      (m: { member: { user_id: string } }) => m.member.user_id === admin.userId,
    ).member;
    expect(
      (await h.call(admin.key, "DELETE", `/organizations/${orgId}/members/${adminMember.id}`)).statusCode,
    ).toBe(409);
  });

  it("a project transferred out of the organization stops its project-scoped keys", async () => {
    const admin = await h.bootstrap("Org G");
    const source = admin.orgId!;
    const destination = await otherOrganizationOf(admin.userId);
    const projectId = await createProject(admin.key, source);
    const scoped = (
      await h.call(admin.key, "POST", `/organizations/${source}/api_keys`, {
        key_name: "s",
        project_id: projectId,
      })
    ).json();
    expect((await h.call(scoped.key, "GET", `/projects/${projectId}`)).statusCode).toBe(200);

    const moved = await h.call(admin.key, "POST", `/organizations/${source}/projects/transfer`, {
      destination_org_id: destination,
      project_ids: [projectId],
    });
    expect(moved.statusCode, moved.body).toBe(200);
    expect((await h.call(scoped.key, "GET", `/projects/${projectId}`)).statusCode).toBe(401);
    expect((await h.call(admin.key, "GET", `/projects/${projectId}`)).json().project.org_id).toBe(
      destination,
    );
  });

  it("a key never learns whether a project or organization it cannot see exists (404, not 403)", async () => {
    const owner = await h.bootstrap("Org H");
    const stranger = await h.bootstrap();
    const projectId = await createProject(owner.key, owner.orgId!);
    for (const [method, url] of [
      ["GET", `/projects/${projectId}`],
      ["DELETE", `/projects/${projectId}`],
      ["GET", `/projects/${projectId}/operations`],
      ["GET", `/organizations/${owner.orgId}`],
      ["GET", `/organizations/${owner.orgId}/api_keys`],
    ] as const) {
      const visible = await h.call(stranger.key, method, url);
      const missing = await h.call(
        stranger.key,
        method,
        url.replace(projectId, "no-such-project-1").replace(owner.orgId!, "org-none-1"),
      );
      expect([visible.statusCode, missing.statusCode]).toEqual([404, 404]);
    }
  });
});

/** A second organization administered by `userId`. */
async function otherOrganizationOf(userId: string): Promise<string> {
  const { createOrganization } = await import("../../src/control/organizations.js");
  return (await createOrganization(h.meta, "Destination", userId)).id;
}
