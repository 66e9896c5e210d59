import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { TestProxy } from "../support/proxy.js";
import {
  type EndpointProject,
  endpointClient,
  expectAlive,
  expectEnded,
  newEndpointProject,
  renamedSession,
  startEndpointProxy,
} from "./endpoint-proxy-support.js";
import { type ManagementHarness, startManagement } from "./support.js";

let h: ManagementHarness;
let proxy: TestProxy;

beforeAll(async () => {
  h = await startManagement();
  proxy = await startEndpointProxy(h);
});
afterAll(async () => {
  await proxy?.close();
  await h?.close();
});

async function call(key: string, method: string, path: string, body?: unknown) {
  const res = await h.call(key, method, path, body);
  return { status: res.statusCode, body: res.body ? res.json() : undefined };
}

async function ok(key: string, method: string, path: string, body?: unknown) {
  const res = await call(key, method, path, body);
  expect(res.status, JSON.stringify(res.body)).toBeLessThan(300);
  return res.body;
}

const rolesPath = (p: EndpointProject) => `/projects/${p.projectId}/branches/${p.branchId}/roles`;

/** Whether `password` still logs `user` in to the project's endpoint through the proxy. */
async function logsIn(project: EndpointProject, password: string, user = "neondb_owner"): Promise<boolean> {
  const client = endpointClient(proxy, project.endpointId, password, { user });
  try {
    await client.connect();
    await client.end();
    return true;
  } catch (error) {
    expect((error as { code?: string }).code).toBe("28P01");
    return false;
  }
}

/** An organization with an admin, and a second user who is a member of it. */
async function organizationWithMember() {
  const admin = await h.bootstrap("Acme");
  const member = await h.bootstrap();
  await ok(admin.key, "POST", `/organizations/${admin.orgId}/invitations`, {
    invitations: [{ email: member.email, role: "member" }],
  });
  const members = await ok(admin.key, "GET", `/organizations/${admin.orgId}/members`);
  const memberId = members.members.find(
    (m: { member: { user_id: string } }) => m.member.user_id === member.userId,
  ).member.id as string;
  return { admin, member, memberId };
}

describe("removing a share ends what the user made through it", () => {
  it("rotates the passwords of the roles the user created or revealed and ends their sessions; the owner's other roles keep theirs", async () => {
    const owner = await h.bootstrap("Owner Org");
    const guest = await h.bootstrap();
    const project = await newEndpointProject(h, owner.key, { org_id: owner.orgId });
    const grant = await ok(owner.key, "POST", `/projects/${project.projectId}/permissions`, {
      email: guest.email,
    });
    const ownerRole = await ok(owner.key, "POST", rolesPath(project), { role: { name: "owner_app" } });

    const guestRole = await ok(guest.key, "POST", rolesPath(project), { role: { name: "guest_role" } });
    const revealed = await ok(guest.key, "GET", `${rolesPath(project)}/neondb_owner/reveal_password`);
    expect(revealed.password).toBe(project.password);
    // Who made the role, and whom each password was shown to, are on record.
    const made = await h.meta.query(
      "SELECT created_by_user_id FROM project_roles WHERE project_id = $1 AND name = 'guest_role'",
      [project.projectId],
    );
    expect(made.rows).toEqual([{ created_by_user_id: guest.userId }]);
    const shown = await h.meta.query(
      "SELECT role_name, how FROM role_password_disclosures WHERE project_id = $1 AND user_id = $2 ORDER BY id",
      [project.projectId, guest.userId],
    );
    expect(shown.rows).toEqual([
      { role_name: "guest_role", how: "created" },
      { role_name: "neondb_owner", how: "revealed" },
    ]);
    const guestSessions = [
      await renamedSession(proxy, project.endpointId, guestRole.role.password, { user: "guest_role" }),
      await renamedSession(proxy, project.endpointId, revealed.password),
    ];
    const ownerSession = await renamedSession(proxy, project.endpointId, ownerRole.role.password, {
      user: "owner_app",
    });

    await ok(owner.key, "DELETE", `/projects/${project.projectId}/permissions/${grant.id}`);

    expect((await call(guest.key, "GET", `/projects/${project.projectId}`)).status).toBe(404);
    for (const session of guestSessions) await expectEnded(session);
    expect(await logsIn(project, guestRole.role.password, "guest_role")).toBe(false);
    expect(await logsIn(project, revealed.password)).toBe(false);
    await expectAlive(ownerSession);
    await ownerSession.end();
    expect(await logsIn(project, ownerRole.role.password, "owner_app")).toBe(true);
    const fresh = await ok(owner.key, "GET", `${rolesPath(project)}/neondb_owner/reveal_password`);
    expect(fresh.password).not.toBe(revealed.password);
    expect(await logsIn(project, fresh.password)).toBe(true);
  });

  it("leaves a password the owner has reset since the user saw it", async () => {
    const owner = await h.bootstrap();
    const guest = await h.bootstrap();
    const project = await newEndpointProject(h, owner.key);
    const grant = await ok(owner.key, "POST", `/projects/${project.projectId}/permissions`, {
      email: guest.email,
    });
    const uri = await ok(
      guest.key,
      "GET",
      `/projects/${project.projectId}/connection_uri?role_name=neondb_owner&database_name=neondb`,
    );
    expect(decodeURIComponent(new URL(uri.uri).password)).toBe(project.password);
    const reset = await ok(owner.key, "POST", `${rolesPath(project)}/neondb_owner/reset_password`);
    const ownerSession = await renamedSession(proxy, project.endpointId, reset.role.password);

    const revoked = await call(owner.key, "DELETE", `/projects/${project.projectId}/permissions/${grant.id}`);
    expect(revoked.status).toBe(200);
    await expectAlive(ownerSession);
    await ownerSession.end();
    expect(await logsIn(project, reset.role.password)).toBe(true);
  });
});

describe("removing an organization member ends what the member made through the membership", () => {
  it("revokes the member's project-scoped keys and rotates the passwords they revealed, ending their sessions", async () => {
    const { admin, member, memberId } = await organizationWithMember();
    const project = await newEndpointProject(h, admin.key, { org_id: admin.orgId });
    const scoped = await ok(member.key, "POST", `/organizations/${admin.orgId}/api_keys`, {
      key_name: "ci",
      project_id: project.projectId,
    });
    const revealed = await ok(scoped.key, "GET", `${rolesPath(project)}/neondb_owner/reveal_password`);
    const created = await ok(scoped.key, "POST", rolesPath(project), { role: { name: "ci_role" } });
    const sessions = [
      await renamedSession(proxy, project.endpointId, revealed.password),
      await renamedSession(proxy, project.endpointId, created.role.password, { user: "ci_role" }),
    ];

    await ok(admin.key, "DELETE", `/organizations/${admin.orgId}/members/${memberId}`);

    expect((await call(member.key, "GET", `/projects/${project.projectId}`)).status).toBe(404);
    expect((await call(scoped.key, "GET", `/projects/${project.projectId}`)).status).toBe(401);
    expect((await call(scoped.key, "GET", `${rolesPath(project)}/neondb_owner/reveal_password`)).status).toBe(
      401,
    );
    for (const session of sessions) await expectEnded(session);
    expect(await logsIn(project, revealed.password)).toBe(false);
    expect(await logsIn(project, created.role.password, "ci_role")).toBe(false);
  });

  it("revokes the organization keys a removed administrator created", async () => {
    const { admin, member, memberId } = await organizationWithMember();
    await ok(admin.key, "PATCH", `/organizations/${admin.orgId}/members/${memberId}`, { role: "admin" });
    const orgKey = await ok(member.key, "POST", `/organizations/${admin.orgId}/api_keys`, {
      key_name: "deploy",
    });
    expect((await call(orgKey.key, "GET", "/projects")).status).toBe(200);
    await ok(admin.key, "DELETE", `/organizations/${admin.orgId}/members/${memberId}`);
    expect((await call(orgKey.key, "GET", "/projects")).status).toBe(401);
  });
});

describe("revoking a key ends what was made through it", () => {
  it("an organization key: the passwords it revealed are rotated", async () => {
    const admin = await h.bootstrap("Keys Org");
    const project = await newEndpointProject(h, admin.key, { org_id: admin.orgId });
    const orgKey = await ok(admin.key, "POST", `/organizations/${admin.orgId}/api_keys`, {
      key_name: "robot",
    });
    const revealed = await ok(orgKey.key, "GET", `${rolesPath(project)}/neondb_owner/reveal_password`);
    const session = await renamedSession(proxy, project.endpointId, revealed.password);
    await ok(admin.key, "DELETE", `/organizations/${admin.orgId}/api_keys/${orgKey.id}`);
    await expectEnded(session);
    expect(await logsIn(project, revealed.password)).toBe(false);
  });

  it("a personal key: the passwords of the projects it created are rotated, the user's other keys keep working", async () => {
    const user = await h.bootstrap();
    const second = await ok(user.key, "POST", "/api_keys", { key_name: "laptop" });
    const project = await newEndpointProject(h, second.key);
    await ok(user.key, "DELETE", `/api_keys/${second.id}`);
    expect(await logsIn(project, project.password)).toBe(false);
    const fresh = await ok(user.key, "GET", `${rolesPath(project)}/neondb_owner/reveal_password`);
    expect(await logsIn(project, fresh.password)).toBe(true);
  });
});

describe("a project leaving its organization", () => {
  it("rotates the passwords shown to the project-scoped keys it no longer answers", async () => {
    const source = await h.bootstrap("Source Org");
    const destination = await h.bootstrap("Destination Org");
    await ok(destination.key, "POST", `/organizations/${destination.orgId}/invitations`, {
      invitations: [{ email: source.email, role: "admin" }],
    });
    const project = await newEndpointProject(h, source.key, { org_id: source.orgId });
    const scoped = await ok(source.key, "POST", `/organizations/${source.orgId}/api_keys`, {
      key_name: "ci",
      project_id: project.projectId,
    });
    const uri = await ok(
      scoped.key,
      "GET",
      `/projects/${project.projectId}/connection_uri?role_name=neondb_owner&database_name=neondb`,
    );
    const session = await renamedSession(proxy, project.endpointId, project.password);
    await ok(source.key, "POST", `/organizations/${source.orgId}/projects/transfer`, {
      destination_org_id: destination.orgId,
      project_ids: [project.projectId],
    });
    expect((await call(scoped.key, "GET", `/projects/${project.projectId}`)).status).toBe(401);
    await expectEnded(session);
    expect(await logsIn(project, decodeURIComponent(new URL(uri.uri).password))).toBe(false);
  });
});

describe("a revocation and a request under way", () => {
  it("a reveal that reached the password while its key was being revoked is refused, not answered", async () => {
    const admin = await h.bootstrap("Race Org");
    const project = await newEndpointProject(h, admin.key, { org_id: admin.orgId });
    const orgKey = await ok(admin.key, "POST", `/organizations/${admin.orgId}/api_keys`, { key_name: "r" });
    const revocation = await h.meta.connect();
    try {
      // A revocation in progress holds the lock that orders revocations and disclosures.
      await revocation.query("BEGIN");
      await revocation.query("SELECT pg_advisory_xact_lock(741163, 1)");
      const reveal = call(orgKey.key, "GET", `${rolesPath(project)}/neondb_owner/reveal_password`);
      await expect
        .poll(async () => {
          const { rows } = await h.meta.query(
            "SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND NOT granted",
          );
          return rows[0].n;
        })
        .toBeGreaterThan(0);
      await revocation.query("UPDATE api_keys SET revoked_at = now() WHERE id = $1", [orgKey.id]);
      await revocation.query("COMMIT");
      const answer = await reveal;
      expect(answer.status).toBe(401);
      expect(JSON.stringify(answer.body)).not.toContain(project.password);
    } finally {
      revocation.release();
    }
  });
});
