import type pg from "pg";
import { projectFor } from "./access.js";
import { changeProject } from "./change.js";
import { badRequest, conflict } from "./control-error.js";
import type { ControlPlane } from "./control-plane.js";
import { queueDrops } from "./drop-queue.js";
import { type EndpointInput, insertEndpoint } from "./endpoint-rows.js";
import { newBranchId, newPhysicalDatabaseName } from "./ids.js";
import { databasesOf, defaultBranch, endpointsOfBranch, getBranch } from "./lookups.js";
import { checkBranchName } from "./names.js";
import type { OperationRow, PlannedOperation } from "./operations.js";
import type { Principal } from "./principal.js";
import { retireUsage } from "./retire-usage.js";
import { type BranchRow, type InitSource, type ProjectRow, toBranch } from "./rows.js";
import { type Queryable, sqlState } from "./sql.js";

export interface BranchCreateInput {
  branch?: {
    name?: string;
    parent_id?: string;
    parent_lsn?: string;
    parent_timestamp?: string;
    protected?: boolean;
    init_source?: string;
    expires_at?: string;
  };
  endpoints?: EndpointInput[];
}

export interface BranchUpdateInput {
  name?: string;
  protected?: boolean;
  expires_at?: string | null;
}

export interface BranchRestoreInput {
  source_branch_id: string;
  source_lsn?: string;
  source_timestamp?: string;
  preserve_under_name?: string;
}

const NO_HISTORY =
  "point-in-time branching is not available: pgtoll keeps no history (history_retention_seconds is 0)";

function checkInitSource(value: string | undefined): InitSource {
  if (value === undefined || value === "parent-data") return "parent-data";
  if (value === "schema-only") return "schema-only";
  throw badRequest(`init_source must be parent-data or schema-only, got "${value}"`);
}

function expiry(value: string | null | undefined): Date | null {
  if (value === undefined || value === null) return null;
  const at = new Date(value);
  if (Number.isNaN(at.getTime()))
    throw badRequest(`expires_at must be an RFC 3339 timestamp, got "${value}"`);
  if (at.getTime() <= Date.now()) throw badRequest("expires_at must be in the future");
  return at;
}

async function insertBranch(db: Queryable, values: Record<string, unknown>): Promise<void> {
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
    if (sqlState(error) === "23505")
      throw conflict(`a branch named "${String(values.name)}" already exists in this project`);
    throw error;
  }
}

/** Who is acting, for a branch's `created_by`. */
async function actorName(db: Queryable, principal: Principal): Promise<string> {
  const userId = principal.kind === "personal" ? principal.userId : principal.createdBy;
  const { rows } = await db.query("SELECT name FROM users WHERE id = $1", [userId]);
  return rows[0]?.name ?? "";
}

/** The branch's roles and (new, empty) databases, mirroring `sourceId`'s. Returns the databases' copy plan. */
async function mirrorContents(db: Queryable, project: ProjectRow, sourceId: string, targetId: string) {
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
    copies.push({
      source: database.physicalName,
      target,
      owner: rows[0].physical_name as string,
      label: `pgtoll ${project.id}/${targetId}/${database.name}`,
    });
  }
  return copies;
}

/**
 * Creates a branch of `parent_id` (default: the project's default branch): a real copy of each of the parent's
 * databases, with its data (`parent-data`, the default) or its schema only (`schema-only`), and the parent's
 * roles; plus the endpoints asked for. How the copy stays consistent while the parent is in use: fence.ts.
 */
export async function createBranch(
  plane: ControlPlane,
  principal: Principal,
  projectId: string,
  input: BranchCreateInput,
) {
  const options = input.branch ?? {};
  if (options.parent_lsn !== undefined || options.parent_timestamp !== undefined)
    throw badRequest(NO_HISTORY);
  const initSource = checkInitSource(options.init_source);
  const endpoints = input.endpoints ?? [];
  if (endpoints.filter((e) => e.type === "read_write").length > 1)
    throw badRequest("a branch has at most one read_write endpoint");
  const branchId = newBranchId();
  const name = checkBranchName(options.name ?? branchId);
  const { operations } = await changeProject(plane, principal, projectId, async (client, { project }) => {
    const parent = options.parent_id
      ? await getBranch(client, projectId, options.parent_id)
      : await defaultBranch(client, projectId);
    if (parent.currentState !== "ready")
      throw conflict(`parent branch ${parent.id} is not ready (${parent.currentState})`);
    await insertBranch(client, {
      id: branchId,
      projectId,
      parentId: parent.id,
      name,
      protected: options.protected,
      initSource,
      state: "init",
      pendingState: "ready",
      expiresAt: expiry(options.expires_at),
      createdBy: await actorName(client, principal),
    });
    await mirrorContents(client, project, parent.id, branchId);
    const planned: PlannedOperation[] = [
      {
        action: "create_branch",
        branchId,
        step: { kind: "copy_branch", branchId, parentId: parent.id, initSource },
      },
    ];
    for (const endpoint of endpoints)
      planned.push((await insertEndpoint(client, project, branchId, endpoint)).planned);
    return { result: undefined, planned };
  });
  return { branch: await getBranch(plane.db, projectId, branchId), operations };
}

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

/** Renames a branch, or changes its protection or expiry (metadata only: no operation). */
export async function updateBranch(
  plane: ControlPlane,
  principal: Principal,
  projectId: string,
  branchId: string,
  input: BranchUpdateInput,
) {
  const { operations } = await changeProject(plane, principal, projectId, async (client) => {
    const branch = await getBranch(client, projectId, branchId, true);
    const name = input.name === undefined ? branch.name : checkBranchName(input.name);
    try {
      await client.query(
        "UPDATE branches SET name = $2, protected = $3, expires_at = $4, updated_at = clock_timestamp() WHERE id = $1",
        [
          branchId,
          name,
          input.protected ?? branch.protected,
          input.expires_at === undefined ? branch.expiresAt : expiry(input.expires_at),
        ],
      );
    } catch (error) {
      if (sqlState(error) === "23505")
        throw conflict(`a branch named "${name}" already exists in this project`);
      throw error;
    }
    return { result: undefined, planned: [] };
  });
  return { branch: await getBranch(plane.db, projectId, branchId), operations };
}

/** Makes the branch the project's default branch. */
export async function setDefaultBranch(
  plane: ControlPlane,
  principal: Principal,
  projectId: string,
  branchId: string,
) {
  const { operations } = await changeProject(plane, principal, projectId, async (client) => {
    await getBranch(client, projectId, branchId, true);
    await client.query(
      "UPDATE branches SET is_default = false, updated_at = clock_timestamp() WHERE project_id = $1 AND is_default",
      [projectId],
    );
    await client.query(
      "UPDATE branches SET is_default = true, updated_at = clock_timestamp() WHERE id = $1",
      [branchId],
    );
    return { result: undefined, planned: [] };
  });
  return { branch: await getBranch(plane.db, projectId, branchId), operations };
}

/** Forgets the project roles no branch has any more, and queues them for dropping. */
async function dropUnusedRoles(db: Queryable, projectId: string): Promise<void> {
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

/**
 * Deletes a branch: its endpoints' sessions end, its databases are dropped for real, and roles only it had go
 * too. Refused (409) for the default branch, a protected branch and a branch with children.
 */
export async function deleteBranch(
  plane: ControlPlane,
  principal: Principal,
  projectId: string,
  branchId: string,
): Promise<{ branch: BranchRow; operations: OperationRow[] }> {
  const { result, operations } = await changeProject(
    plane,
    principal,
    projectId,
    async (client: pg.PoolClient) => {
      const branch = await getBranch(client, projectId, branchId, true);
      if (branch.isDefault)
        throw conflict(`branch ${branchId} is the project's default branch and cannot be deleted`);
      if (branch.protected)
        throw conflict(`branch ${branchId} is protected: unprotect it before deleting it`);
      const { rowCount } = await client.query("SELECT 1 FROM branches WHERE parent_id = $1 LIMIT 1", [
        branchId,
      ]);
      if (rowCount) throw conflict(`branch ${branchId} has child branches: delete them first`);
      const databases = (await databasesOf(client, branchId)).map((d) => d.physicalName);
      await retireUsage(client, plane.cluster, projectId, databases);
      await queueDrops(
        client,
        databases.map((physicalName) => ({ kind: "database" as const, physicalName })),
      );
      const endpoints = await endpointsOfBranch(client, branchId);
      await client.query("DELETE FROM endpoints WHERE branch_id = $1", [branchId]);
      await client.query("DELETE FROM branches WHERE id = $1", [branchId]);
      await dropUnusedRoles(client, projectId);
      const planned: PlannedOperation[] = endpoints.map((endpoint) => ({
        action: "suspend_compute",
        branchId,
        endpointId: endpoint.id,
        step: { kind: "suspend_endpoint", endpointId: endpoint.id },
      }));
      planned.push({ action: "delete_timeline", branchId, step: { kind: "drop_queued" } });
      return { result: branch, planned };
    },
  );
  return { branch: result, operations };
}

/**
 * Restores a branch to the current state of `source_branch_id` (typically its parent): its databases are
 * replaced by fresh copies of the source's, and its roles become the source's. With `preserve_under_name` the
 * previous state is kept as a new branch of that name (required when the branch has children, which move to
 * it). The branch keeps its id and endpoints, whose sessions are restarted.
 */
export async function restoreBranch(
  plane: ControlPlane,
  principal: Principal,
  projectId: string,
  branchId: string,
  input: BranchRestoreInput,
) {
  if (input.source_lsn !== undefined || input.source_timestamp !== undefined) throw badRequest(NO_HISTORY);
  if (input.source_branch_id === branchId)
    throw badRequest(`${NO_HISTORY}; restore from another branch, such as the parent`);
  const { operations } = await changeProject(plane, principal, projectId, async (client, { project }) => {
    const target = await getBranch(client, projectId, branchId, true);
    const source = await getBranch(client, projectId, input.source_branch_id);
    if (source.currentState !== "ready")
      throw conflict(`source branch ${source.id} is not ready (${source.currentState})`);
    const { rowCount: children } = await client.query("SELECT 1 FROM branches WHERE parent_id = $1 LIMIT 1", [
      branchId,
    ]);
    if (children && !input.preserve_under_name) {
      throw badRequest(
        `branch ${branchId} has child branches: give preserve_under_name to keep its current state as a new branch`,
      );
    }
    const old = await databasesOf(client, branchId);
    let replaced = old.map((d) => d.physicalName);
    if (input.preserve_under_name) {
      const preservedId = newBranchId();
      await insertBranch(client, {
        id: preservedId,
        projectId,
        parentId: target.parentId,
        name: checkBranchName(input.preserve_under_name),
        initSource: target.initSource,
        state: "ready",
        pendingState: null,
        createdBy: await actorName(client, principal),
      });
      await client.query("UPDATE branch_databases SET branch_id = $2 WHERE branch_id = $1", [
        branchId,
        preservedId,
      ]);
      await client.query(
        "INSERT INTO branch_roles (branch_id, project_id, name, protected) SELECT $2, project_id, name, protected FROM branch_roles WHERE branch_id = $1",
        [branchId, preservedId],
      );
      await client.query("UPDATE branches SET parent_id = $2 WHERE parent_id = $1 AND id <> $2", [
        branchId,
        preservedId,
      ]);
      replaced = [];
    } else {
      await retireUsage(client, plane.cluster, projectId, replaced);
      await client.query("DELETE FROM branch_databases WHERE branch_id = $1", [branchId]);
    }
    await client.query("DELETE FROM branch_roles WHERE branch_id = $1", [branchId]);
    const copies = await mirrorContents(client, project, source.id, branchId);
    await dropUnusedRoles(client, projectId);
    await client.query(
      `UPDATE branches SET parent_id = $2, current_state = 'resetting', pending_state = 'ready', state_changed_at = clock_timestamp(),
         updated_at = clock_timestamp() WHERE id = $1`,
      [branchId, source.id],
    );
    const endpoints = await endpointsOfBranch(client, branchId);
    const planned: PlannedOperation[] = [
      { action: "create_timeline", branchId, step: { kind: "restore_branch", branchId, copies, replaced } },
    ];
    for (const endpoint of endpoints.filter((e) => e.currentState === "active")) {
      planned.push({
        action: "suspend_compute",
        branchId,
        endpointId: endpoint.id,
        step: { kind: "suspend_endpoint", endpointId: endpoint.id },
      });
      planned.push({
        action: "start_compute",
        branchId,
        endpointId: endpoint.id,
        step: { kind: "start_endpoint", endpointId: endpoint.id },
      });
    }
    return { result: undefined, planned };
  });
  return { branch: await getBranch(plane.db, projectId, branchId), operations };
}
