import { randomUUID } from "node:crypto";
import { SqlState } from "../db/sql-state.js";
import { projectFor, requireAdmin } from "./access.js";
import { badRequest, conflict, notFound } from "./control-error.js";
import type { Plane } from "./plane.js";
import type { Principal } from "./principal.js";
import { revokeAccess } from "./revocation.js";
import { type Queryable, sqlState } from "./sql.js";

/**
 * Sharing a project with a user by email (Neon's project permissions). The user with that email reaches the
 * project with member-level access: it uses the project (branches, endpoints, databases, roles), and may not
 * delete it, transfer it or manage who it is shared with. Only an administrator of the project shares it.
 */
export interface ProjectPermission {
  id: string;
  grantedToEmail: string;
  grantedAt: Date;
  revokedAt: Date | null;
}

const COLUMNS = "id, granted_to_email, granted_at, revoked_at";

function toPermission(row: Record<string, unknown>): ProjectPermission {
  return {
    id: row.id as string,
    grantedToEmail: row.granted_to_email as string,
    grantedAt: row.granted_at as Date,
    revokedAt: (row.revoked_at as Date | null) ?? null,
  };
}

/** SQL (on alias `p`) for the projects shared with a personal key's user; nothing for other keys. */
export function sharedWith(principal: Principal, param: number): { sql: string; params: unknown[] } {
  if (principal.kind !== "personal") return { sql: "false", params: [] };
  return {
    sql: `p.id IN (SELECT pp.project_id FROM project_permissions pp JOIN users u ON lower(u.email) = lower(pp.granted_to_email)
                   WHERE u.id = $${param} AND pp.revoked_at IS NULL)`,
    params: [principal.userId],
  };
}

async function adminProject(db: Queryable, principal: Principal, projectId: string): Promise<void> {
  requireAdmin(await projectFor(db, principal, projectId), "manage who a project is shared with");
}

/** The project's live grants, oldest first. */
export async function listPermissions(
  db: Queryable,
  principal: Principal,
  projectId: string,
): Promise<ProjectPermission[]> {
  await adminProject(db, principal, projectId);
  const { rows } = await db.query(
    `SELECT ${COLUMNS} FROM project_permissions WHERE project_id = $1 AND revoked_at IS NULL ORDER BY granted_at, id`,
    [projectId],
  );
  return rows.map(toPermission);
}

const EMAIL = /^[^\s@]+@[^\s@]+\.[^\s@]+$/;

/** Shares the project with `email` (409 when it already is). The address need not belong to a user yet. */
export async function grantPermission(
  db: Queryable,
  principal: Principal,
  projectId: string,
  email: string,
): Promise<ProjectPermission> {
  const address = email.trim();
  if (!EMAIL.test(address) || address.length > 256)
    throw badRequest(`email "${email}" is not an email address`);
  await adminProject(db, principal, projectId);
  try {
    const { rows } = await db.query(
      `INSERT INTO project_permissions (id, project_id, granted_to_email) VALUES ($1, $2, $3) RETURNING ${COLUMNS}`,
      [randomUUID(), projectId, address],
    );
    return toPermission(rows[0]!);
  } catch (error) {
    if (sqlState(error) === SqlState.uniqueViolation)
      throw conflict(`project ${projectId} is already shared with ${address}`);
    throw error;
  }
}

/**
 * Ends a grant: the user loses access at its next request, and the passwords it was shown of the project's roles
 * (roles it created, revealed or reset) are rotated, which ends their sessions (revocation.ts).
 */
export async function revokePermission(
  plane: Plane,
  principal: Principal,
  projectId: string,
  permissionId: string,
): Promise<ProjectPermission> {
  await adminProject(plane.db, principal, projectId);
  const hidden = notFound(`permission ${permissionId} not found`);
  if (!/^[0-9a-f-]{36}$/i.test(permissionId)) throw hidden;
  return revokeAccess(plane, async (client) => {
    const { rows } = await client.query(
      `UPDATE project_permissions SET revoked_at = clock_timestamp()
        WHERE id = $1 AND project_id = $2 AND revoked_at IS NULL RETURNING ${COLUMNS}`,
      [permissionId, projectId],
    );
    if (!rows[0]) throw hidden;
    return { result: toPermission(rows[0]), scope: { projectIds: [projectId] } };
  });
}
