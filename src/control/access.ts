import { forbidden, notFound } from "./control-error.js";
import type { Principal } from "./principal.js";
import { type ProjectRow, toProject } from "./rows.js";
import type { Queryable } from "./sql.js";

/** Member-level access manages a project; admin-level access may also delete it. */
export type AccessLevel = "member" | "admin";

export interface ProjectAccess {
  project: ProjectRow;
  level: AccessLevel;
}

/**
 * The project as `principal` sees it, or 404 — also when it exists but the key may not see it, so that a key
 * never learns whether a project outside its reach exists. `forUpdate` locks the project row (callers
 * serialise their changes to one project on it).
 */
export async function projectFor(
  db: Queryable,
  principal: Principal,
  projectId: string,
  forUpdate = false,
): Promise<ProjectAccess> {
  const { rows } = await db.query(`SELECT * FROM projects WHERE id = $1${forUpdate ? " FOR UPDATE" : ""}`, [
    projectId,
  ]);
  const hidden = notFound(`project ${projectId} not found`);
  if (!rows[0]) throw hidden;
  const project = toProject(rows[0]);
  switch (principal.kind) {
    case "personal": {
      if (project.ownerUserId === principal.userId) return { project, level: "admin" };
      const { rows: members } = project.orgId
        ? await db.query("SELECT role FROM organization_members WHERE org_id = $1 AND user_id = $2", [
            project.orgId,
            principal.userId,
          ])
        : { rows: [] };
      if (members[0]) return { project, level: members[0].role === "admin" ? "admin" : "member" };
      // Shared with the user by email: it uses the project, and may not delete, transfer or share it.
      if (await isSharedWith(db, projectId, principal.userId)) return { project, level: "member" };
      throw hidden;
    }
    case "organization":
      if (project.orgId !== principal.orgId) throw hidden;
      return { project, level: "admin" };
    case "project":
      if (project.id !== principal.projectId || project.orgId !== principal.orgId) throw hidden;
      return { project, level: "member" };
  }
}

export function requireAdmin(access: ProjectAccess, action: string): void {
  if (access.level !== "admin")
    throw forbidden(`only an organization administrator or an organization API key may ${action}`);
}

/**
 * SQL condition (on alias `p`) selecting the projects `principal` can see, with its parameters numbered from
 * `firstParam`.
 */
export function visibleProjects(
  principal: Principal,
  firstParam: number,
): { sql: string; params: unknown[] } {
  const n = firstParam;
  switch (principal.kind) {
    case "personal":
      return {
        sql: `(p.owner_user_id = $${n} OR p.org_id IN (SELECT org_id FROM organization_members WHERE user_id = $${n}))`,
        params: [principal.userId],
      };
    case "organization":
      return { sql: `p.org_id = $${n}`, params: [principal.orgId] };
    case "project":
      return {
        sql: `(p.id = $${n} AND p.org_id = $${n + 1})`,
        params: [principal.projectId, principal.orgId],
      };
  }
}

/** Whether `userId`'s email has a live grant on the project (member-level access). */
export async function isSharedWith(db: Queryable, projectId: string, userId: string): Promise<boolean> {
  const { rows } = await db.query(
    `SELECT 1 FROM project_permissions pp JOIN users u ON lower(u.email) = lower(pp.granted_to_email)
      WHERE pp.project_id = $1 AND u.id = $2 AND pp.revoked_at IS NULL`,
    [projectId, userId],
  );
  return rows.length > 0;
}
