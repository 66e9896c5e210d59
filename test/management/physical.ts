import pg from "pg";
import type { ManagementHarness } from "./support.js";
import { clusterUrlFor } from "./support.js";

/** The real database behind a branch's database, and the real role behind one of its roles. */
export async function physicalOf(
  h: ManagementHarness,
  branchId: string,
  database = "neondb",
  role = "neondb_owner",
) {
  const { rows } = await h.meta.query(
    `SELECT d.physical_name AS database, pr.physical_name AS role, pr.password_sealed
     FROM branch_databases d JOIN branches b ON b.id = d.branch_id
     JOIN project_roles pr ON pr.project_id = b.project_id AND pr.name = $3
     WHERE d.branch_id = $1 AND d.name = $2`,
    [branchId, database, role],
  );
  if (!rows[0]) throw new Error(`no database ${database} / role ${role} on ${branchId}`);
  return {
    database: rows[0].database as string,
    role: rows[0].role as string,
    password: h.box.open(rows[0].password_sealed),
  };
}

/** Connects to a branch database as the branch's role, with its password (what the proxy will do upstream). */
export async function connectAs(
  h: ManagementHarness,
  branchId: string,
  database = "neondb",
  role = "neondb_owner",
): Promise<pg.Client> {
  const target = await physicalOf(h, branchId, database, role);
  const client = new pg.Client({
    connectionString: clusterUrlFor(target.database, { name: target.role, password: target.password }),
  });
  client.on("error", () => {});
  await client.connect();
  return client;
}

export async function query<T = Record<string, unknown>>(
  h: ManagementHarness,
  branchId: string,
  sql: string,
  database = "neondb",
): Promise<T[]> {
  const client = await connectAs(h, branchId, database);
  try {
    return (await client.query(sql)).rows as T[];
  } finally {
    await client.end();
  }
}
