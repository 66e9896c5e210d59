import type { ProjectCluster } from "./cluster.js";
import { dropPhysicalDatabase } from "./physical-databases.js";
import { dropPhysicalRole } from "./physical-roles.js";
import type { Queryable } from "./sql.js";

export interface PhysicalDrop {
  kind: "database" | "role";
  physicalName: string;
}

/**
 * Queues databases and roles for dropping. Call it in the transaction that forgets them in the metadata, so
 * that a crash in between never leaves a real database or role that nothing refers to.
 */
export async function queueDrops(db: Queryable, drops: readonly PhysicalDrop[]): Promise<void> {
  if (!drops.length) return;
  await db.query(
    "INSERT INTO physical_drops (kind, physical_name) SELECT * FROM unnest($1::text[], $2::text[])",
    [drops.map((drop) => drop.kind), drops.map((drop) => drop.physicalName)],
  );
}

/** Databases dropped at once: each DROP DATABASE waits for a checkpoint, and concurrent ones share it. */
const PARALLEL_DROPS = 4;

/**
 * Drops what the queue holds: databases first (roles may own objects in them), then roles. Each entry leaves
 * the queue only once it is gone from the cluster; a failure leaves it queued for the next pass.
 * Returns the number of entries still queued.
 */
export async function processDropQueue(db: Queryable, cluster: ProjectCluster): Promise<number> {
  const { rows } = await db.query<{ id: bigint; kind: "database" | "role"; physical_name: string }>(
    "SELECT id, kind, physical_name FROM physical_drops ORDER BY kind = 'role', id",
  );
  let left = 0;
  const drop = async (row: (typeof rows)[number]) => {
    try {
      if (row.kind === "database") await dropPhysicalDatabase(cluster, row.physical_name);
      else await dropPhysicalRole(cluster, row.physical_name);
      await db.query("DELETE FROM physical_drops WHERE id = $1", [row.id]);
    } catch {
      left++;
    }
  };
  const databases = rows.filter((row) => row.kind === "database");
  for (let i = 0; i < databases.length; i += PARALLEL_DROPS)
    await Promise.all(databases.slice(i, i + PARALLEL_DROPS).map(drop));
  for (const row of rows.filter((r) => r.kind === "role")) await drop(row);
  return left;
}
