import type { ProjectCluster } from "./cluster.js";

/**
 * The `application_name` the wire proxy gives its upstream sessions for an endpoint. It is how suspending or
 * deleting an endpoint finds, and ends, the sessions opened through it.
 */
export function endpointApplicationName(endpointId: string): string {
  return `pgtoll endpoint ${endpointId}`;
}

/** Ends every session opened through the endpoint. */
export async function endEndpointSessions(cluster: ProjectCluster, endpointId: string): Promise<number> {
  const { rows } = await cluster.admin.query(
    "SELECT pg_terminate_backend(pid, 5000) AS ended FROM pg_stat_activity WHERE application_name = $1",
    [endpointApplicationName(endpointId)],
  );
  return rows.length;
}
