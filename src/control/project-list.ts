import { visibleProjects } from "./access.js";
import { requireMembership } from "./api-keys.js";
import { badRequest } from "./control-error.js";
import type { Principal } from "./principal.js";
import { sharedWith } from "./project-permissions.js";
import { type ProjectRow, toProject } from "./rows.js";
import type { Queryable } from "./sql.js";

export interface ProjectListOptions {
  cursor?: string;
  limit?: number;
  search?: string;
  orgId?: string;
  /** The projects shared with the caller by email instead of its own and its organizations'. */
  shared?: boolean;
}

// The cursor is the (creation time in microseconds, id) of the last project of the previous page.
const CREATED_US = "(extract(epoch FROM p.created_at) * 1000000)::bigint";

function encodeCursor(createdUs: string, id: string): string {
  return Buffer.from(JSON.stringify([createdUs, id])).toString("base64url");
}

function decodeCursor(cursor: string): [string, string] {
  try {
    const value = JSON.parse(Buffer.from(cursor, "base64url").toString("utf8"));
    if (Array.isArray(value) && /^\d{1,18}$/.test(String(value[0])) && typeof value[1] === "string")
      return [String(value[0]), value[1]];
  } catch {
    // fall through
  }
  throw badRequest("invalid cursor: pass pagination.cursor of the previous page as is");
}

/** The projects the caller can see, newest first, `limit` (1-400, default 10) at a time. */
export async function listProjects(
  db: Queryable,
  principal: Principal,
  options: ProjectListOptions,
): Promise<{ projects: ProjectRow[]; cursor: string | null }> {
  const limit = Math.min(Math.max(options.limit ?? 10, 1), 400);
  const visible = options.shared ? sharedWith(principal, 1) : visibleProjects(principal, 1);
  const params: unknown[] = [...visible.params];
  const where = [visible.sql];
  if (options.orgId !== undefined) {
    if (principal.kind === "personal") await requireMembership(db, options.orgId, principal.userId, false);
    params.push(options.orgId);
    where.push(`p.org_id = $${params.length}`);
  }
  if (options.search) {
    params.push(`%${options.search.replace(/[\\%_]/g, "\\$&")}%`);
    where.push(`(p.name ILIKE $${params.length} OR p.id ILIKE $${params.length})`);
  }
  if (options.cursor !== undefined) {
    const [createdUs, id] = decodeCursor(options.cursor);
    params.push(createdUs, id);
    where.push(`(${CREATED_US}, p.id) < ($${params.length - 1}::bigint, $${params.length})`);
  }
  params.push(limit);
  const { rows } = await db.query(
    `SELECT p.*, ${CREATED_US}::text AS created_us FROM projects p WHERE ${where.join(" AND ")}
     ORDER BY p.created_at DESC, p.id DESC LIMIT $${params.length}`,
    params,
  );
  const last = rows[rows.length - 1];
  return { projects: rows.map(toProject), cursor: last ? encodeCursor(last.created_us, last.id) : null };
}
