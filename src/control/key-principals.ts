import { hashApiKeyToken } from "./api-key-token.js";
import { unauthorized } from "./control-error.js";
import type { Principal } from "./principal.js";
import type { Queryable } from "./sql.js";

type Row = Record<string, unknown>;

/**
 * Which keys work: not revoked, and a project-scoped key only while its project belongs to its organization
 * (on alias `k`).
 */
const KEY_WORKS = `k.revoked_at IS NULL
  AND (k.kind <> 'project' OR EXISTS (SELECT 1 FROM projects p WHERE p.id = k.project_id AND p.org_id = k.org_id))`;
const PRINCIPAL_COLUMNS = "k.id, k.kind, k.user_id, k.org_id, k.project_id, k.created_by";

function toPrincipal(row: Row): Principal {
  const keyId = Number(row.id);
  switch (row.kind as Principal["kind"]) {
    case "personal":
      return { kind: "personal", keyId, userId: row.user_id as string, accountId: row.user_id as string };
    case "organization":
      return {
        kind: "organization",
        keyId,
        orgId: row.org_id as string,
        createdBy: row.created_by as string,
        accountId: row.org_id as string,
      };
    default:
      return {
        kind: "project",
        keyId,
        orgId: row.org_id as string,
        projectId: row.project_id as string,
        createdBy: row.created_by as string,
        accountId: row.org_id as string,
      };
  }
}

/**
 * Resolves a bearer token to the principal it acts as, and records the use (time and address) in the same
 * statement. 401 for an unknown or revoked token, and for a project-scoped key whose project is gone or has
 * left the key's organization. Nothing is cached: a revocation takes effect on the very next request.
 */
export async function authenticateApiKey(db: Queryable, token: string, fromAddr: string): Promise<Principal> {
  const { rows } = await db.query(
    `UPDATE api_keys k SET last_used_at = now(), last_used_from_addr = $2
     WHERE token_hash = $1 AND ${KEY_WORKS} RETURNING ${PRINCIPAL_COLUMNS}`,
    [hashApiKeyToken(token), fromAddr],
  );
  if (!rows[0])
    throw unauthorized("invalid API key: it is unknown, revoked, or its project left the organization");
  return toPrincipal(rows[0]);
}

/** The principal a key acts as while it works (as `authenticateApiKey` decides), or null. Records no use. */
export async function principalOfKey(db: Queryable, keyId: number): Promise<Principal | null> {
  const { rows } = await db.query(
    `SELECT ${PRINCIPAL_COLUMNS} FROM api_keys k WHERE k.id = $1 AND ${KEY_WORKS}`,
    [keyId],
  );
  return rows[0] ? toPrincipal(rows[0]) : null;
}

/** The user behind a principal: a personal key's owner, or the creator of an organization or project-scoped key. */
export function userOf(principal: Principal): string {
  return principal.kind === "personal" ? principal.userId : principal.createdBy;
}
