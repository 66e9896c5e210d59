import { randomUUID } from "node:crypto";
import { badRequest, conflict, notFound } from "./control-error.js";
import { newOrganizationId } from "./ids.js";
import type { Plane } from "./plane.js";
import { revokeAccess } from "./revocation.js";
import type { Queryable } from "./sql.js";

export type MemberRole = "admin" | "member";

export interface Organization {
  id: string;
  name: string;
  createdAt: Date;
  updatedAt: Date;
}

export interface Membership {
  id: string;
  orgId: string;
  userId: string;
  role: MemberRole;
  joinedAt: Date;
}

export interface MemberWithUser extends Membership {
  email: string;
}

type Row = Record<string, unknown>;

const toOrganization = (row: Row): Organization => ({
  id: row.id as string,
  name: row.name as string,
  createdAt: row.created_at as Date,
  updatedAt: row.updated_at as Date,
});

const toMembership = (row: Row): MemberWithUser => ({
  id: row.id as string,
  orgId: row.org_id as string,
  userId: row.user_id as string,
  role: row.role as MemberRole,
  joinedAt: row.joined_at as Date,
  email: (row.email as string) ?? "",
});

/** Creates an organization administered by `adminUserId`. Run it inside a transaction. */
export async function createOrganization(
  db: Queryable,
  name: string,
  adminUserId: string,
): Promise<Organization> {
  const trimmed = name.trim();
  if (!trimmed || trimmed.length > 256)
    throw badRequest("an organization name must have 1 to 256 characters");
  const { rows } = await db.query(
    "INSERT INTO organizations (id, name) VALUES ($1, $2) RETURNING id, name, created_at, updated_at",
    [newOrganizationId(), trimmed],
  );
  const org = toOrganization(rows[0]);
  await addMember(db, org.id, adminUserId, "admin");
  return org;
}

export async function getOrganization(db: Queryable, id: string): Promise<Organization | null> {
  const { rows } = await db.query(
    "SELECT id, name, created_at, updated_at FROM organizations WHERE id = $1",
    [id],
  );
  return rows[0] ? toOrganization(rows[0]) : null;
}

/** Adds `userId` to the organization, or changes the role of a member already in it. */
export async function addMember(
  db: Queryable,
  orgId: string,
  userId: string,
  role: MemberRole,
): Promise<Membership> {
  const { rows } = await db.query(
    `INSERT INTO organization_members (id, org_id, user_id, role) VALUES ($1, $2, $3, $4)
     ON CONFLICT (org_id, user_id) DO UPDATE SET role = EXCLUDED.role
     RETURNING id, org_id, user_id, role, joined_at`,
    [randomUUID(), orgId, userId, role],
  );
  return toMembership(rows[0]);
}

export async function membershipOf(db: Queryable, orgId: string, userId: string): Promise<Membership | null> {
  const { rows } = await db.query(
    "SELECT id, org_id, user_id, role, joined_at FROM organization_members WHERE org_id = $1 AND user_id = $2",
    [orgId, userId],
  );
  return rows[0] ? toMembership(rows[0]) : null;
}

export async function organizationsOfUser(
  db: Queryable,
  userId: string,
): Promise<(Organization & { role: MemberRole })[]> {
  const { rows } = await db.query(
    `SELECT o.id, o.name, o.created_at, o.updated_at, m.role FROM organizations o
     JOIN organization_members m ON m.org_id = o.id WHERE m.user_id = $1 ORDER BY o.created_at, o.id`,
    [userId],
  );
  return rows.map((row) => ({ ...toOrganization(row), role: row.role as MemberRole }));
}

export async function listMembers(db: Queryable, orgId: string): Promise<MemberWithUser[]> {
  const { rows } = await db.query(
    `SELECT m.id, m.org_id, m.user_id, m.role, m.joined_at, u.email FROM organization_members m
     JOIN users u ON u.id = m.user_id WHERE m.org_id = $1 ORDER BY m.joined_at, m.id`,
    [orgId],
  );
  return rows.map(toMembership);
}

export async function getMember(db: Queryable, orgId: string, memberId: string): Promise<MemberWithUser> {
  const { rows } = await db.query(
    `SELECT m.id, m.org_id, m.user_id, m.role, m.joined_at, u.email FROM organization_members m
     JOIN users u ON u.id = m.user_id WHERE m.org_id = $1 AND m.id::text = $2`,
    [orgId, memberId],
  );
  if (!rows[0]) throw notFound(`member ${memberId} not found in organization ${orgId}`);
  return toMembership(rows[0]);
}

async function adminCount(db: Queryable, orgId: string): Promise<number> {
  const { rows } = await db.query(
    "SELECT count(*)::int AS n FROM organization_members WHERE org_id = $1 AND role = 'admin'",
    [orgId],
  );
  return rows[0].n as number;
}

/** Changes a member's role; the last admin cannot be demoted. Run it inside a transaction. */
export async function setMemberRole(
  db: Queryable,
  orgId: string,
  memberId: string,
  role: MemberRole,
): Promise<MemberWithUser> {
  await db.query("SELECT id FROM organizations WHERE id = $1 FOR UPDATE", [orgId]);
  const member = await getMember(db, orgId, memberId);
  if (member.role === "admin" && role !== "admin" && (await adminCount(db, orgId)) === 1) {
    throw conflict("the organization's last admin cannot be demoted: make another member an admin first");
  }
  await db.query("UPDATE organization_members SET role = $2 WHERE id = $1", [member.id, role]);
  return { ...member, role };
}

/**
 * Removes a member (an admin removing anyone, or a member leaving). Access through the member's personal keys
 * to the organization's projects ends with it; the keys themselves keep working elsewhere. What the member made
 * through the membership ends too: the organization and project-scoped keys it created are revoked, and the
 * passwords of the organization's roles shown to those keys or to the member are rotated, which ends their
 * sessions (revocation.ts). The last admin cannot leave.
 */
export async function removeMember(plane: Plane, orgId: string, memberId: string): Promise<MemberWithUser> {
  return revokeAccess(plane, async (db) => {
    await db.query("SELECT id FROM organizations WHERE id = $1 FOR UPDATE", [orgId]);
    const member = await getMember(db, orgId, memberId);
    if (member.role === "admin" && (await adminCount(db, orgId)) === 1) {
      throw conflict("the organization's last admin cannot be removed: make another member an admin first");
    }
    await db.query("DELETE FROM organization_members WHERE id = $1", [member.id]);
    const { rows: keys } = await db.query(
      `UPDATE api_keys SET revoked_at = now()
        WHERE org_id = $1 AND created_by = $2 AND kind <> 'personal' AND revoked_at IS NULL RETURNING id`,
      [orgId, member.userId],
    );
    return { result: member, scope: { orgId, keyIds: keys.map((key) => Number(key.id)) } };
  });
}
