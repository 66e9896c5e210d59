import { projectFor, requireAdmin } from "./access.js";
import { checkHistoryRetention } from "./branch-rows.js";
import { changeProject } from "./change.js";
import { forbidden, notFound } from "./control-error.js";
import { processDropQueue, queueDrops } from "./drop-queue.js";
import { allowlistOf, checkAllowedIps, endDisallowedSessions } from "./ip-allowlist.js";
import { checkProjectName } from "./names.js";
import { lockProjectForChange, type OperationRow } from "./operations.js";
import type { Plane } from "./plane.js";
import type { Principal } from "./principal.js";
import { type ProjectRow, toProject } from "./rows.js";
import { inTransaction, type Queryable } from "./sql.js";

export interface ProjectUpdateInput {
  name?: string;
  settings?: Record<string, unknown>;
  default_endpoint_settings?: Record<string, unknown>;
  history_retention_seconds?: number;
}

export async function loadProject(db: Queryable, projectId: string): Promise<ProjectRow> {
  const { rows } = await db.query("SELECT * FROM projects WHERE id = $1", [projectId]);
  if (!rows[0]) throw notFound(`project ${projectId} not found`);
  return toProject(rows[0]);
}

export async function getProject(
  db: Queryable,
  principal: Principal,
  projectId: string,
): Promise<ProjectRow> {
  return (await projectFor(db, principal, projectId)).project;
}

/**
 * Renames the project or changes its settings. An allowlist that restricts more than before is followed by an
 * operation that ends the sessions it no longer admits.
 */
export async function updateProject(
  plane: Plane,
  principal: Principal,
  projectId: string,
  input: ProjectUpdateInput,
): Promise<{ project: ProjectRow; operations: OperationRow[] }> {
  checkHistoryRetention(input.history_retention_seconds);
  checkAllowedIps(input.settings);
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
      `UPDATE projects SET name = $2, settings = $3, default_endpoint_settings = $4, updated_at = clock_timestamp()
        WHERE id = $1`,
      [
        projectId,
        input.name === undefined ? access.project.name : checkProjectName(input.name),
        JSON.stringify(settings),
        JSON.stringify(endpointDefaults),
      ],
    );
    const restricts = allowlistOf(settings) !== null;
    const changed =
      JSON.stringify(settings.allowed_ips) !== JSON.stringify(access.project.settings.allowed_ips);
    return { result: undefined, planned: restricts && changed ? [endDisallowedSessions(projectId)] : [] };
  });
  return { project: await loadProject(plane.db, projectId), operations };
}

/**
 * Deletes a project and, for real, its databases and roles. Needs admin-level access: the owner, an
 * organization administrator or an organization key (a project-scoped key cannot delete its project).
 */
export async function deleteProject(
  plane: Plane,
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
