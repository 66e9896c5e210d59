import { createHash } from "node:crypto";
import type { ProjectCluster } from "./cluster.js";

/**
 * The `application_name` the wire proxy gives its upstream sessions for an endpoint. It is how suspending or
 * deleting an endpoint finds, and ends, the sessions opened through it. Every role on the cluster can read
 * every session's `application_name` (pg_stat_activity), so it carries a digest of the endpoint id, not the id.
 */
export function endpointApplicationName(endpointId: string): string {
  return `pgtoll ${createHash("sha256").update(endpointId).digest("hex").slice(0, 24)}`;
}

/** Ends every session opened through the endpoint. */
export async function endEndpointSessions(cluster: ProjectCluster, endpointId: string): Promise<number> {
  const { rows } = await cluster.admin.query(
    "SELECT pg_terminate_backend(pid, 5000) AS ended FROM pg_stat_activity WHERE application_name = ANY($1)",
    // Also the name a pgtoll process that has not been updated yet gives them.
    [[endpointApplicationName(endpointId), `pgtoll endpoint ${endpointId}`]],
  );
  return rows.length;
}
