import { projectFor } from "./access.js";
import { badRequest } from "./control-error.js";
import { getBranch } from "./lookups.js";
import type { Principal } from "./principal.js";
import { type BranchRow, toBranch } from "./rows.js";
import type { Queryable } from "./sql.js";

export interface BranchListOptions {
  search?: string;
  sortBy?: "name" | "created_at" | "updated_at";
  sortOrder?: "asc" | "desc";
  cursor?: string;
  limit?: number;
}

/** The project's branches, sorted (default: updated_at, newest first), with an opaque `next` cursor. */
export async function listBranches(
  db: Queryable,
  principal: Principal,
  projectId: string,
  options: BranchListOptions,
): Promise<{ branches: BranchRow[]; next: string | null }> {
  await projectFor(db, principal, projectId);
  const sortBy = options.sortBy ?? "updated_at";
  const descending = (options.sortOrder ?? "desc") === "desc";
  const limit = Math.min(Math.max(options.limit ?? 10_000, 1), 10_000);
  const key = sortBy === "name" ? "name" : `(extract(epoch FROM ${sortBy}) * 1000000)::bigint::text`;
  const keyExpr = sortBy === "name" ? "name" : `lpad(${key}, 20, '0')`;
  const params: unknown[] = [projectId];
  const where = ["project_id = $1"];
  if (options.search) {
    params.push(`%${options.search.replace(/[\\%_]/g, "\\$&")}%`);
    where.push(`(name ILIKE $${params.length} OR id ILIKE $${params.length})`);
  }
  if (options.cursor !== undefined) {
    let cursor: [string, string];
    try {
      cursor = JSON.parse(Buffer.from(options.cursor, "base64url").toString("utf8"));
      if (!Array.isArray(cursor) || typeof cursor[0] !== "string" || typeof cursor[1] !== "string")
        throw new Error();
    } catch {
      throw badRequest("invalid cursor: pass pagination.next of the previous page as is");
    }
    params.push(cursor[0], cursor[1]);
    where.push(
      `(${keyExpr} COLLATE "C", id) ${descending ? "<" : ">"} ($${params.length - 1} COLLATE "C", $${params.length})`,
    );
  }
  params.push(limit + 1);
  const direction = descending ? "DESC" : "ASC";
  const { rows } = await db.query(
    `SELECT *, ${keyExpr} AS sort_key FROM branches WHERE ${where.join(" AND ")}
     ORDER BY ${keyExpr} COLLATE "C" ${direction}, id ${direction} LIMIT $${params.length}`,
    params,
  );
  const page = rows.slice(0, limit);
  const last = page[page.length - 1];
  const next =
    rows.length > limit && last
      ? Buffer.from(JSON.stringify([last.sort_key, last.id])).toString("base64url")
      : null;
  return { branches: page.map(toBranch), next };
}

export async function readBranch(
  db: Queryable,
  principal: Principal,
  projectId: string,
  branchId: string,
): Promise<BranchRow> {
  await projectFor(db, principal, projectId);
  return getBranch(db, projectId, branchId);
}
