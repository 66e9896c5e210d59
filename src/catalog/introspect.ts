import type pg from "pg";
import { LISTING_LIMITS } from "./listing.js";

/** A table as the catalog shows it: names, column names and types, the planner's row estimate. Never a row. */
export interface CatalogTable {
  schema: string;
  name: string;
  kind: string;
  /** pg_class.reltuples; null until the table was first analysed. */
  approximateRows: number | null;
  columns: { name: string; type: string }[];
}

const KIND = `CASE c.relkind WHEN 'r' THEN 'table' WHEN 'p' THEN 'partitioned table' WHEN 'v' THEN 'view'
  WHEN 'm' THEN 'materialized view' WHEN 'f' THEN 'foreign table' END`;

/**
 * The relations the role may read, from the system catalogs only (no user table is read, no count(*)): at most
 * $1 tables, $2 columns each. Partitions are left out: their parent stands for them.
 */
const READABLE_TABLES = `SELECT n.nspname AS schema, c.relname AS name, ${KIND} AS kind,
  CASE WHEN c.reltuples < 0 THEN NULL ELSE c.reltuples::float8 END AS approximate_rows,
  coalesce((SELECT json_agg(json_build_object('name', a.attname, 'type', format_type(a.atttypid, a.atttypmod))
              ORDER BY a.attnum)
         FROM (SELECT * FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
               ORDER BY a.attnum LIMIT $2) a), '[]') AS columns
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind IN ('r', 'p', 'v', 'm', 'f') AND NOT c.relispartition
  AND n.nspname NOT IN ('pg_catalog', 'information_schema')
  AND n.nspname NOT LIKE 'pg\\_toast%' AND n.nspname NOT LIKE 'pg\\_temp%'
  AND has_table_privilege(c.oid, 'SELECT')
ORDER BY 1, 2
LIMIT $1`;

export interface IntrospectOptions {
  /** statement_timeout of the catalog read on the provider's database, ms. */
  timeoutMs: number;
  /** Most tables read (the rest are left out). */
  maxTables?: number;
}

/**
 * Reads the tables the provider's role can read, in a read-only transaction bounded in time; the pool is the
 * provider's own (its registered role), so the catalog sees exactly what agents may read.
 */
export async function readProviderTables(pool: pg.Pool, options: IntrospectOptions): Promise<CatalogTable[]> {
  const client = await pool.connect();
  let broken: Error | undefined;
  try {
    await client.query("BEGIN READ ONLY");
    await client.query(`SET LOCAL statement_timeout = ${Math.max(1, Math.floor(options.timeoutMs))}`);
    const { rows } = await client.query<{
      schema: string;
      name: string;
      kind: string;
      approximate_rows: number | null;
      columns: { name: string; type: string }[];
    }>(READABLE_TABLES, [options.maxTables ?? LISTING_LIMITS.tables, LISTING_LIMITS.columnsPerTable]);
    await client.query("COMMIT");
    return rows.map((row) => ({
      schema: row.schema,
      name: row.name,
      kind: row.kind,
      approximateRows: row.approximate_rows === null ? null : Math.round(row.approximate_rows),
      columns: row.columns,
    }));
  } catch (error) {
    broken = await client.query("ROLLBACK").then(
      () => undefined,
      (rollbackError: Error) => rollbackError,
    );
    throw error;
  } finally {
    client.release(broken);
  }
}

/**
 * Whether `written` (a table as a provider names it: `airports`, `public.airports`, quoted names already folded
 * by parseTableName) names the table: a qualified name its schema and name, a bare one its name in any schema.
 */
export function namesTable(written: string, table: Pick<CatalogTable, "schema" | "name">): boolean {
  return written === table.name || written === `${table.schema}.${table.name}`;
}
