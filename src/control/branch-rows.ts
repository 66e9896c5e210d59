import { SqlState } from "../db/sql-state.js";
import { badRequest, conflict } from "./control-error.js";
import { queueDrops } from "./drop-queue.js";
import { newPhysicalDatabaseName } from "./ids.js";
import { databasesOf } from "./lookups.js";
import type { Principal } from "./principal.js";
import type { InitSource, ProjectRow } from "./rows.js";
import { type Queryable, sqlState } from "./sql.js";

// Helpers the branch changes share.

/** Refusal for the point-in-time options: there is no history to branch from. */
export const NO_HISTORY =
  "point-in-time branching is not available: pgtoll keeps no history (history_retention_seconds is 0)";

/** `history_retention_seconds` of a request: only 0 is true of this installation; anything else is refused. */
export function checkHistoryRetention(seconds: number | undefined): void {
  if (seconds !== undefined && seconds !== 0)
    throw badRequest(
      `history_retention_seconds must be 0, got ${seconds}: pgtoll keeps no point-in-time history to retain`,
    );
}

export function checkInitSource(value: string | undefined): InitSource {
  if (value === undefined || value === "parent-data") return "parent-data";
  if (value === "schema-only") return "schema-only";
  throw badRequest(`init_source must be parent-data or schema-only, got "${value}"`);
}

export async function insertBranch(db: Queryable, values: Record<string, unknown>): Promise<void> {
  try {
    await db.query(
      `INSERT INTO branches (id, project_id, parent_id, name, protected, init_source, current_state, pending_state,
         expires_at, creation_source, created_by_name)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 'api', $10)`,
      [
        values.id,
        values.projectId,
        values.parentId,
        values.name,
        values.protected ?? false,
        values.initSource,
        values.state,
        values.pendingState,
        values.expiresAt ?? null,
        values.createdBy ?? "",
      ],
    );
  } catch (error) {
    if (sqlState(error) === SqlState.uniqueViolation)
      throw conflict(`a branch named "${String(values.name)}" already exists in this project`);
    throw error;
  }
}

/** Who is acting, for a branch's `created_by`. */
export async function actorName(db: Queryable, principal: Principal): Promise<string> {
  const userId = principal.kind === "personal" ? principal.userId : principal.createdBy;
  const { rows } = await db.query("SELECT name FROM users WHERE id = $1", [userId]);
  return rows[0]?.name ?? "";
}

/** The branch's roles and (new, empty) databases, mirroring `sourceId`'s. Returns the databases' copy plan. */
export async function mirrorContents(db: Queryable, project: ProjectRow, sourceId: string, targetId: string) {
  await db.query(
    `INSERT INTO branch_roles (branch_id, project_id, name, protected)
     SELECT $2, project_id, name, protected FROM branch_roles WHERE branch_id = $1`,
    [sourceId, targetId],
  );
  const copies = [];
  for (const database of await databasesOf(db, sourceId)) {
    const target = newPhysicalDatabaseName();
    await db.query(
      "INSERT INTO branch_databases (branch_id, name, owner_name, physical_name) VALUES ($1, $2, $3, $4)",
      [targetId, database.name, database.ownerName, target],
    );
    const { rows } = await db.query(
      "SELECT physical_name FROM project_roles WHERE project_id = $1 AND name = $2",
      [project.id, database.ownerName],
    );
    copies.push({ source: database.physicalName, target, owner: rows[0].physical_name as string });
  }
  return copies;
}

/** Forgets the project roles no branch has any more, and queues them for dropping. */
export async function dropUnusedRoles(db: Queryable, projectId: string): Promise<void> {
  const { rows } = await db.query(
    `DELETE FROM project_roles pr WHERE project_id = $1
       AND NOT EXISTS (SELECT 1 FROM branch_roles br WHERE br.project_id = pr.project_id AND br.name = pr.name)
     RETURNING physical_name`,
    [projectId],
  );
  await queueDrops(
    db,
    rows.map((row) => ({ kind: "role" as const, physicalName: row.physical_name as string })),
  );
}
