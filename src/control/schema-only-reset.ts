import type { ProjectCluster } from "./cluster.js";

// Objects of user schemas (not catalogs, not temp or toast schemas) that no extension owns.
const USER_RELATIONS = `
  SELECT c.oid::regclass::text AS name, c.relkind FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
  WHERE c.relkind IN ('r', 'p', 'm', 'S') AND n.nspname <> 'information_schema' AND n.nspname NOT LIKE 'pg\\_%'
    AND NOT EXISTS (SELECT 1 FROM pg_depend d
                    WHERE d.classid = 'pg_class'::regclass AND d.objid = c.oid AND d.deptype = 'e')`;

/**
 * Turns a full copy of a database into a schema-only one: every user table is emptied, identities and
 * sequences restart, materialized views become unpopulated and large objects are removed. Tables that belong
 * to extensions keep their rows (as pg_dump --schema-only would recreate them with the extension).
 */
export async function removeData(cluster: ProjectCluster, database: string): Promise<void> {
  await cluster.withDatabase(database, async (client) => {
    const { rows } = await client.query<{ name: string; relkind: string }>(USER_RELATIONS);
    const tables = rows.filter((row) => row.relkind === "r" || row.relkind === "p").map((row) => row.name);
    await client.query("BEGIN");
    if (tables.length) await client.query(`TRUNCATE ${tables.join(", ")} RESTART IDENTITY CASCADE`);
    for (const row of rows) {
      if (row.relkind === "S") await client.query(`ALTER SEQUENCE ${row.name} RESTART`);
      if (row.relkind === "m") await client.query(`REFRESH MATERIALIZED VIEW ${row.name} WITH NO DATA`);
    }
    await client.query("SELECT lo_unlink(oid) FROM pg_largeobject_metadata");
    await client.query("COMMIT");
    await client.query(`VACUUM`);
  });
}
