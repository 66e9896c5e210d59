import { requireMembership } from "./api-keys.js";
import { checkHistoryRetention } from "./branch-rows.js";
import { computeUnits } from "./compute-units.js";
import { badRequest, forbidden, notFound } from "./control-error.js";
import {
  newBranchId,
  newEndpointId,
  newPhysicalDatabaseName,
  newPhysicalRoleName,
  newProjectId,
  newRolePassword,
  newRolePrefix,
} from "./ids.js";
import { checkAllowedIps } from "./ip-allowlist.js";
import { branchesOf, databasesOf, endpointsOfProject, rolesOf } from "./lookups.js";
import { checkBranchName, checkDatabaseName, checkProjectName, checkRoleName } from "./names.js";
import { getOperations, type OperationRow, scheduleOperations } from "./operations.js";
import type { Plane } from "./plane.js";
import type { Principal } from "./principal.js";
import { insertProjectRole } from "./project-role-rows.js";
import { loadProject } from "./projects.js";
import { holdAgainstRevocation } from "./revocation-lock.js";
import type { BranchRow, DatabaseRow, EndpointRow, ProjectRow, RoleRow } from "./rows.js";
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
  plane: Plane,
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
  checkHistoryRetention(input.history_retention_seconds);
  checkAllowedIps(input.settings);
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
    await holdAgainstRevocation(client, principal);
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
        0,
        JSON.stringify(input.settings ?? {}),
        JSON.stringify(endpointSettings),
      ],
    );
    await client.query(
      `INSERT INTO branches (id, project_id, name, is_default, init_source, current_state, pending_state, creation_source, created_by_name)
       VALUES ($1, $2, $3, true, 'parent-data', 'init', 'ready', 'api', $4)`,
      [branchId, projectId, branchName, creator[0]?.name ?? ""],
    );
    await insertProjectRole(client, plane.box, principal, {
      projectId,
      name: roleName,
      physicalName: newPhysicalRoleName(),
      password,
    });
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
  await plane.awaitOperations(projectId);
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
