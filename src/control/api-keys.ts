import { hashApiKeyToken, newApiKeyToken } from "./api-key-token.js";
import { forbidden, notFound } from "./control-error.js";
import { membershipOf } from "./organizations.js";
import type { Plane } from "./plane.js";
import type { PersonalPrincipal } from "./principal.js";
import { revokeAccess } from "./revocation.js";
import type { Queryable } from "./sql.js";

export type ApiKeyKind = "personal" | "organization" | "project";

export interface ApiKeyRecord {
  id: number;
  kind: ApiKeyKind;
  name: string;
  orgId: string | null;
  projectId: string | null;
  createdBy: { id: string; name: string };
  createdAt: Date;
  revokedAt: Date | null;
  lastUsedAt: Date | null;
  lastUsedFromAddr: string;
}

/** A key just created: its record and the secret, which is never available again. */
export interface CreatedApiKey {
  record: ApiKeyRecord;
  token: string;
}

type Row = Record<string, unknown>;

const SELECT = `SELECT k.id, k.kind, k.name, k.org_id, k.project_id, k.created_by, u.name AS created_by_name, k.created_at,
  k.revoked_at, k.last_used_at, k.last_used_from_addr FROM api_keys k JOIN users u ON u.id = k.created_by`;

function toRecord(row: Row): ApiKeyRecord {
  return {
    id: Number(row.id),
    kind: row.kind as ApiKeyKind,
    name: row.name as string,
    orgId: (row.org_id as string | null) ?? null,
    projectId: (row.project_id as string | null) ?? null,
    createdBy: { id: row.created_by as string, name: row.created_by_name as string },
    createdAt: row.created_at as Date,
    revokedAt: (row.revoked_at as Date | null) ?? null,
    lastUsedAt: (row.last_used_at as Date | null) ?? null,
    lastUsedFromAddr: row.last_used_from_addr as string,
  };
}

async function insertKey(
  db: Queryable,
  values: {
    kind: ApiKeyKind;
    name: string;
    userId: string | null;
    orgId: string | null;
    projectId: string | null;
    createdBy: string;
  },
): Promise<CreatedApiKey> {
  const token = newApiKeyToken();
  const { rows } = await db.query(
    `WITH k AS (
       INSERT INTO api_keys (kind, name, token_hash, user_id, org_id, project_id, created_by)
       VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING *)
     SELECT k.id, k.kind, k.name, k.org_id, k.project_id, k.created_by, u.name AS created_by_name, k.created_at,
       k.revoked_at, k.last_used_at, k.last_used_from_addr FROM k JOIN users u ON u.id = k.created_by`,
    [
      values.kind,
      values.name,
      hashApiKeyToken(token),
      values.userId,
      values.orgId,
      values.projectId,
      values.createdBy,
    ],
  );
  return { record: toRecord(rows[0]), token };
}

/** Any user may create personal keys for themself. */
export async function createPersonalKey(db: Queryable, userId: string, name: string): Promise<CreatedApiKey> {
  return insertKey(db, { kind: "personal", name, userId, orgId: null, projectId: null, createdBy: userId });
}

/** The user's personal keys that still work, oldest first. */
export async function listPersonalKeys(db: Queryable, userId: string): Promise<ApiKeyRecord[]> {
  const { rows } = await db.query(
    `${SELECT} WHERE k.kind = 'personal' AND k.user_id = $1 AND k.revoked_at IS NULL ORDER BY k.id`,
    [userId],
  );
  return rows.map(toRecord);
}

/**
 * Revokes one of the caller's own personal keys (404 for any other key). Revoking twice is harmless. What was
 * made through the key ends with it: the passwords it was shown are rotated (revocation.ts).
 */
export async function revokePersonalKey(plane: Plane, userId: string, keyId: number): Promise<ApiKeyRecord> {
  return revokeKey(
    plane,
    keyId,
    "k.kind = 'personal' AND k.user_id = $2",
    [userId],
    `API key ${keyId} not found`,
  );
}

/** 404 unless the user belongs to the organization; 403 when `needAdmin` and the user is only a member. */
export async function requireMembership(
  db: Queryable,
  orgId: string,
  userId: string,
  needAdmin: boolean,
): Promise<void> {
  const membership = await membershipOf(db, orgId, userId);
  if (!membership) throw notFound(`organization ${orgId} not found`);
  if (needAdmin && membership.role !== "admin")
    throw forbidden(`only administrators of organization ${orgId} may do this`);
}

/**
 * Creates an organization key (caller: an administrator) or, with `projectId`, a project-scoped key (caller:
 * any member; the project must belong to the organization). Both need a personal key as the credential.
 */
export async function createOrganizationKey(
  db: Queryable,
  caller: PersonalPrincipal,
  orgId: string,
  name: string,
  projectId?: string,
): Promise<CreatedApiKey> {
  await requireMembership(db, orgId, caller.userId, projectId === undefined);
  if (projectId !== undefined) {
    const { rowCount } = await db.query("SELECT 1 FROM projects WHERE id = $1 AND org_id = $2", [
      projectId,
      orgId,
    ]);
    if (!rowCount) throw notFound(`project ${projectId} not found in organization ${orgId}`);
  }
  return insertKey(db, {
    kind: projectId === undefined ? "organization" : "project",
    name,
    userId: null,
    orgId,
    projectId: projectId ?? null,
    createdBy: caller.userId,
  });
}

/** The organization's organization and project-scoped keys that still work (administrators only). */
export async function listOrganizationKeys(
  db: Queryable,
  caller: PersonalPrincipal,
  orgId: string,
): Promise<ApiKeyRecord[]> {
  await requireMembership(db, orgId, caller.userId, true);
  const { rows } = await db.query(
    `${SELECT} WHERE k.kind <> 'personal' AND k.org_id = $1 AND k.revoked_at IS NULL ORDER BY k.id`,
    [orgId],
  );
  return rows.map(toRecord);
}

/**
 * Revokes an organization or project-scoped key of the organization (administrators only), and rotates the
 * passwords it was shown (revocation.ts).
 */
export async function revokeOrganizationKey(
  plane: Plane,
  caller: PersonalPrincipal,
  orgId: string,
  keyId: number,
): Promise<ApiKeyRecord> {
  await requireMembership(plane.db, orgId, caller.userId, true);
  const missing = `API key ${keyId} not found in organization ${orgId}`;
  return revokeKey(plane, keyId, "k.kind <> 'personal' AND k.org_id = $2", [orgId], missing);
}

/** Revokes the key `which` ($2…) selects (404 with `missing` otherwise); rotates the passwords it was shown. */
function revokeKey(
  plane: Plane,
  keyId: number,
  which: string,
  params: unknown[],
  missing: string,
): Promise<ApiKeyRecord> {
  return revokeAccess(plane, async (db) => {
    await db.query(
      `UPDATE api_keys k SET revoked_at = coalesce(revoked_at, now()) WHERE k.id = $1 AND ${which}`,
      [keyId, ...params],
    );
    const { rows } = await db.query(`${SELECT} WHERE k.id = $1 AND ${which}`, [keyId, ...params]);
    if (!rows[0]) throw notFound(missing);
    return { result: toRecord(rows[0]), scope: { keyIds: [keyId] } };
  });
}
