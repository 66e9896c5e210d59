import { projectsWithActiveOperations } from "./operations.js";
import type { Plane } from "./plane.js";
import type { BranchRow, ProjectRow } from "./rows.js";
import { databaseUsage, physicalDatabasesBy, sumUsage, type Usage } from "./usage.js";

/** A project with what the cluster measures for it, for the API's project records. */
export interface ProjectView {
  project: ProjectRow;
  usage: Usage;
  /** Operations are scheduled or running: a change now would get 423. */
  locked: boolean;
  /** When one of its endpoints was last started, if ever. */
  computeLastActiveAt: Date | null;
}

export interface BranchView {
  branch: BranchRow;
  usage: Usage;
}

export async function describeProjects(
  plane: Plane,
  projects: readonly ProjectRow[],
): Promise<ProjectView[]> {
  const ids = projects.map((project) => project.id);
  const [databases, busy, lastActive] = await Promise.all([
    physicalDatabasesBy(plane.db, "project", ids),
    projectsWithActiveOperations(plane.db, ids),
    plane.db.query(
      "SELECT project_id, max(last_active) AS at FROM endpoints WHERE project_id = ANY($1::text[]) GROUP BY project_id",
      [ids],
    ),
  ]);
  const usage = await databaseUsage(plane.cluster, [...databases.values()].flat());
  const activeAt = new Map(lastActive.rows.map((row) => [row.project_id as string, row.at as Date | null]));
  return projects.map((project) => {
    const current = sumUsage(usage, databases.get(project.id) ?? []);
    return {
      project,
      usage: {
        sizeBytes: current.sizeBytes,
        activeMs: current.activeMs + project.retiredActiveMs,
        sessionMs: current.sessionMs + project.retiredSessionMs,
      },
      locked: busy.has(project.id),
      computeLastActiveAt: activeAt.get(project.id) ?? null,
    };
  });
}

export async function describeBranches(plane: Plane, branches: readonly BranchRow[]): Promise<BranchView[]> {
  const databases = await physicalDatabasesBy(
    plane.db,
    "branch",
    branches.map((branch) => branch.id),
  );
  const usage = await databaseUsage(plane.cluster, [...databases.values()].flat());
  return branches.map((branch) => ({ branch, usage: sumUsage(usage, databases.get(branch.id) ?? []) }));
}
