import { projectFor, requireAdmin, visibleProjects } from "./access.js";
import { requireMembership } from "./api-keys.js";
import { changeProject } from "./change.js";
import { badRequest, forbidden, notFound } from "./control-error.js";
import type { ControlPlane } from "./control-plane.js";
import { processDropQueue, queueDrops } from "./drop-queue.js";
import {
  newBranchId,
  newEndpointId,
  newPhysicalDatabaseName,
  newProjectId,
  newRolePassword,
  newRolePrefix,
} from "./ids.js";
import { branchesOf, databasesOf, endpointsOfProject, rolesOf } from "./lookups.js";
import {
  checkBranchName,
  checkDatabaseName,
  checkProjectName,
  checkRoleName,
  physicalRoleName,
} from "./names.js";
import { getOperations, lockProjectForChange, type OperationRow, scheduleOperations } from "./operations.js";
import type { Principal } from "./principal.js";
import {
  type BranchRow,
  type DatabaseRow,
  type EndpointRow,
  type ProjectRow,
  type RoleRow,
  toProject,
} from "./rows.js";
import { inTransaction, type Queryable } from "./sql.js";

export interface ProjectCreateInput {
  name?: string;
  region_id?: string;
  pg_version?: number;
  org_id?: string;
  store_passwords?: boolean;
  history_retention_seconds?: number;
  settings?: Record<string, unknown>;
  default_endpoint_settings?: Record<string, unknown>;
  autoscaling_limit_min_cu?: number;
  autoscaling_limit_max_cu?: number;
  branch?: { name?: string; role_name?: string; database_name?: string };
}

export interface ProjectUpdateInput {
  name?: string;
  settings?: Record<string, unknown>;
  default_endpoint_settings?: Record<string, unknown>;
  history_retention_seconds?: number;
}

/** A new project with what was made for it; `password` is the owner role's, shown in this answer. */
export interface CreatedProject {
  project: ProjectRow;
  branch: BranchRow;
  endpoints: EndpointRow[];
  databases: DatabaseRow[];
  roles: RoleRow[];
  passwords: Map<string, string>;
  operations: OperationRow[];
}

/** Compute-unit defaults, taken from the project's default endpoint settings. */
export function computeUnits(settings: Record<string, unknown>): {
  min: number;
  max: number;
  suspend: number;
} {
  const min =
    typeof settings.autoscaling_limit_min_cu === "number" ? settings.autoscaling_limit_min_cu : 0.25;
  const max =
    typeof settings.autoscaling_limit_max_cu === "number"
      ? settings.autoscaling_limit_max_cu
      : Math.max(min, 0.25);
  const suspend = typeof settings.suspend_timeout_seconds === "number" ? settings.suspend_timeout_seconds : 0;
  return { min, max, suspend };
}

async function ownerFor(db: Queryable, principal: Principal, orgId: string | undefined) {
  switch (principal.kind) {
    case "project":
      throw forbidden("a project-scoped API key cannot create projects");
    case "organization":
      if (orgId !== undefined && orgId !== principal.orgId) throw notFound(`organization ${orgId} not found`);
      return { ownerUserId: null, orgId: principal.orgId, creator: principal.createdBy };
    case "personal":
      if (orgId === undefined)
        return { ownerUserId: principal.userId, orgId: null, creator: principal.userId };
      await requireMembership(db, orgId, principal.userId, false);
      return { ownerUserId: null, orgId, creator: principal.userId };
  }
}

/**
 * Creates a project: its default branch `main` with one database (`neondb`) owned by one role
 * (`neondb_owner`), and a read_write endpoint; the role and database are made for real on the cluster by the
 * project's first operations.
 */
export async function createProject(
  plane: ControlPlane,
  principal: Principal,
  input: ProjectCreateInput,
): Promise<CreatedProject> {
  const majorVersion = await plane.cluster.majorVersion();
  if (input.pg_version !== undefined && input.pg_version !== majorVersion) {
    throw badRequest(
      `pg_version ${input.pg_version} is not available: projects here run PostgreSQL ${majorVersion}`,
    );
  }
  if (input.region_id !== undefined && input.region_id !== plane.settings.regionId) {
    throw badRequest(
      `region ${input.region_id} is not available: this installation's region is ${plane.settings.regionId}`,
    );
  }
  const projectId = newProjectId();
  const rolePrefix = newRolePrefix();
  const databaseName = checkDatabaseName(input.branch?.database_name ?? "neondb");
  const roleName = checkRoleName(input.branch?.role_name ?? `${databaseName}_owner`, rolePrefix);
  const branchName = checkBranchName(input.branch?.name ?? "main");
  const name = checkProjectName(input.name ?? projectId);
  const endpointSettings = {
    ...(input.default_endpoint_settings ?? {}),
    ...(input.autoscaling_limit_min_cu !== undefined
      ? { autoscaling_limit_min_cu: input.autoscaling_limit_min_cu }
      : {}),
    ...(input.autoscaling_limit_max_cu !== undefined
      ? { autoscaling_limit_max_cu: input.autoscaling_limit_max_cu }
      : {}),
  };
  const units = computeUnits(endpointSettings);
  const password = newRolePassword();
  const branchId = newBranchId();
  const endpointId = newEndpointId();

  const ids = await inTransaction(plane.db, async (client) => {
    const owner = await ownerFor(client, principal, input.org_id);
    const { rows: creator } = await client.query("SELECT name FROM users WHERE id = $1", [owner.creator]);
    await client.query(
      `INSERT INTO projects (id, name, owner_user_id, org_id, region_id, pg_version, role_prefix, store_passwords,
         history_retention_seconds, settings, default_endpoint_settings, creation_source)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, 'api')`,
      [
        projectId,
        name,
        owner.ownerUserId,
        owner.orgId,
        plane.settings.regionId,
        majorVersion,
        rolePrefix,
        input.store_passwords ?? true,
        input.history_retention_seconds ?? 0,
        JSON.stringify(input.settings ?? {}),
        JSON.stringify(endpointSettings),
      ],
    );
    await client.query(
      `INSERT INTO branches (id, project_id, name, is_default, init_source, current_state, pending_state, creation_source, created_by_name)
       VALUES ($1, $2, $3, true, 'parent-data', 'init', 'ready', 'api', $4)`,
      [branchId, projectId, branchName, creator[0]?.name ?? ""],
    );
    await client.query(
      "INSERT INTO project_roles (project_id, name, physical_name, password_sealed) VALUES ($1, $2, $3, $4)",
      [projectId, roleName, physicalRoleName(rolePrefix, roleName), plane.box.seal(password)],
    );
    await client.query("INSERT INTO branch_roles (branch_id, project_id, name) VALUES ($1, $2, $3)", [
      branchId,
      projectId,
      roleName,
    ]);
    await client.query(
      "INSERT INTO branch_databases (branch_id, name, owner_name, physical_name) VALUES ($1, $2, $3, $4)",
      [branchId, databaseName, roleName, newPhysicalDatabaseName()],
    );
    await client.query(
      `INSERT INTO endpoints (id, project_id, branch_id, type, current_state, pending_state, autoscaling_limit_min_cu,
         autoscaling_limit_max_cu, suspend_timeout_seconds, creation_source)
       VALUES ($1, $2, $3, 'read_write', 'init', 'active', $4, $5, $6, 'api')`,
      [endpointId, projectId, branchId, units.min, units.max, units.suspend],
    );
    const ops = await scheduleOperations(
      client,
      projectId,
      [
        { action: "create_timeline", branchId, step: { kind: "provision_branch", branchId } },
        { action: "start_compute", branchId, endpointId, step: { kind: "start_endpoint", endpointId } },
      ],
      plane.instanceId,
    );
    return ops.map((op) => op.id);
  });
  await plane.settle(projectId);
  const project = await loadProject(plane.db, projectId);
  const [branch] = await branchesOf(plane.db, projectId);
  return {
    project,
    branch: branch!,
    endpoints: await endpointsOfProject(plane.db, projectId),
    databases: await databasesOf(plane.db, branchId),
    roles: await rolesOf(plane.db, branchId),
    passwords: new Map([[roleName, password]]),
    operations: await getOperations(plane.db, ids),
  };
}

export async function loadProject(db: Queryable, projectId: string): Promise<ProjectRow> {
  const { rows } = await db.query("SELECT * FROM projects WHERE id = $1", [projectId]);
  if (!rows[0]) throw notFound(`project ${projectId} not found`);
  return toProject(rows[0]);
}

export interface ProjectListOptions {
  cursor?: string;
  limit?: number;
  search?: string;
  orgId?: string;
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
  const visible = visibleProjects(principal, 1);
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

export async function getProject(
  db: Queryable,
  principal: Principal,
  projectId: string,
): Promise<ProjectRow> {
  return (await projectFor(db, principal, projectId)).project;
}

/** Renames the project or changes its settings (no operation is needed). */
export async function updateProject(
  plane: ControlPlane,
  principal: Principal,
  projectId: string,
  input: ProjectUpdateInput,
): Promise<{ project: ProjectRow; operations: OperationRow[] }> {
  const { operations } = await changeProject(plane, principal, projectId, async (client, access) => {
    const settings =
      input.settings === undefined
        ? access.project.settings
        : { ...access.project.settings, ...input.settings };
    const endpointDefaults =
      input.default_endpoint_settings === undefined
        ? access.project.defaultEndpointSettings
        : { ...access.project.defaultEndpointSettings, ...input.default_endpoint_settings };
    await client.query(
      `UPDATE projects SET name = $2, settings = $3, default_endpoint_settings = $4, history_retention_seconds = $5,
         updated_at = clock_timestamp() WHERE id = $1`,
      [
        projectId,
        input.name === undefined ? access.project.name : checkProjectName(input.name),
        JSON.stringify(settings),
        JSON.stringify(endpointDefaults),
        input.history_retention_seconds ?? access.project.historyRetentionSeconds,
      ],
    );
    return { result: undefined, planned: [] };
  });
  return { project: await loadProject(plane.db, projectId), operations };
}

/**
 * Deletes a project and, for real, its databases and roles. Needs admin-level access: the owner, an
 * organization administrator or an organization key (a project-scoped key cannot delete its project).
 */
export async function deleteProject(
  plane: ControlPlane,
  principal: Principal,
  projectId: string,
): Promise<ProjectRow> {
  if (principal.kind === "project") throw forbidden("a project-scoped API key cannot delete its project");
  const project = await inTransaction(plane.db, async (client) => {
    const access = await projectFor(client, principal, projectId, true);
    requireAdmin(access, "delete a project");
    await lockProjectForChange(client, projectId);
    const { rows: databases } = await client.query(
      "SELECT d.physical_name FROM branch_databases d JOIN branches b ON b.id = d.branch_id WHERE b.project_id = $1",
      [projectId],
    );
    const { rows: roles } = await client.query(
      "SELECT physical_name FROM project_roles WHERE project_id = $1",
      [projectId],
    );
    await queueDrops(client, [
      ...databases.map((row) => ({ kind: "database" as const, physicalName: row.physical_name as string })),
      ...roles.map((row) => ({ kind: "role" as const, physicalName: row.physical_name as string })),
    ]);
    await client.query("DELETE FROM endpoints WHERE project_id = $1", [projectId]);
    await client.query("UPDATE branches SET parent_id = NULL WHERE project_id = $1", [projectId]);
    await client.query("DELETE FROM projects WHERE id = $1", [projectId]);
    return access.project;
  });
  await processDropQueue(plane.db, plane.cluster);
  return project;
}
