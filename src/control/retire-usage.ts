import type { ProjectCluster } from "./cluster.js";
import type { Queryable } from "./sql.js";
import { databaseUsage, sumUsage } from "./usage.js";

/**
 * Adds what the cluster measured for databases about to be dropped to their project's totals, so that a
 * project's cpu_used_sec and active time include deleted branches and databases (as Neon's do).
 */
export async function retireUsage(
  db: Queryable,
  cluster: ProjectCluster,
  projectId: string,
  databases: readonly string[],
): Promise<void> {
  if (!databases.length) return;
  const usage = sumUsage(await databaseUsage(cluster, databases), databases);
  await db.query(
    "UPDATE projects SET retired_active_ms = retired_active_ms + $2, retired_session_ms = retired_session_ms + $3 WHERE id = $1",
    [projectId, usage.activeMs, usage.sessionMs],
  );
}
