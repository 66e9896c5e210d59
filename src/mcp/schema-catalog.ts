import type { ProxySession } from "./proxy-session.js";

/**
 * Schema discovery for MCP tools and resources: plain catalog queries run through the agent's proxy session,
 * so they are guarded and metered like any statement (a row per table for the list, one row for a table's
 * description), the same as the agent running them with psql. Only relations the provider's role may read
 * are listed.
 */

const KIND = `CASE c.relkind WHEN 'r' THEN 'table' WHEN 'p' THEN 'partitioned table' WHEN 'v' THEN 'view'
  WHEN 'm' THEN 'materialized view' WHEN 'f' THEN 'foreign table' END`;

/** reltuples is -1 until the table is first analysed: then there is no estimate. */
const ROW_ESTIMATE = "CASE WHEN c.reltuples < 0 THEN NULL ELSE c.reltuples::float8 END";

const USER_RELATIONS = `c.relkind IN ('r', 'p', 'v', 'm', 'f')
  AND n.nspname NOT IN ('pg_catalog', 'information_schema')
  AND n.nspname NOT LIKE 'pg\\_toast%' AND n.nspname NOT LIKE 'pg\\_temp%'
  AND has_table_privilege(c.oid, 'SELECT')`;

const LIST_TABLES = `SELECT n.nspname AS schema, c.relname AS name, ${KIND} AS kind,
  obj_description(c.oid, 'pg_class') AS comment, ${ROW_ESTIMATE} AS "rowEstimate",
  (SELECT json_agg(json_build_object('name', a.attname, 'type', format_type(a.atttypid, a.atttypmod))
     ORDER BY a.attnum)
   FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped) AS columns
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE ${USER_RELATIONS}
ORDER BY 1, 2`;

const DESCRIBE_TABLE = `SELECT n.nspname AS schema, c.relname AS name, ${KIND} AS kind,
  obj_description(c.oid, 'pg_class') AS comment, ${ROW_ESTIMATE} AS "rowEstimate",
  (SELECT json_agg(json_build_object('name', a.attname, 'type', format_type(a.atttypid, a.atttypmod),
       'nullable', NOT a.attnotnull, 'default', pg_get_expr(d.adbin, d.adrelid),
       'comment', col_description(c.oid, a.attnum)) ORDER BY a.attnum)
   FROM pg_attribute a LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
   WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped) AS columns,
  (SELECT json_agg(json_build_object('name', k.conname,
       'type', CASE k.contype WHEN 'p' THEN 'primary key' WHEN 'f' THEN 'foreign key' WHEN 'u' THEN 'unique'
         WHEN 'c' THEN 'check' WHEN 'x' THEN 'exclusion' ELSE 'other' END,
       'definition', pg_get_constraintdef(k.oid)) ORDER BY k.contype, k.conname)
   FROM pg_constraint k WHERE k.conrelid = c.oid) AS constraints,
  (SELECT json_agg(json_build_object('name', i.relname, 'unique', x.indisunique, 'primary', x.indisprimary,
       'definition', pg_get_indexdef(x.indexrelid)) ORDER BY i.relname)
   FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid WHERE x.indrelid = c.oid) AS indexes
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.oid = to_regclass($1) AND ${USER_RELATIONS}`;

/** More tables than any schema an agent can usefully read in one answer. */
const MAX_TABLES = 1000;

export interface TableSummary {
  schema: string;
  name: string;
  kind: string;
  comment: string | null;
  rowEstimate: number | null;
  columns: { name: string; type: string }[] | null;
}

export interface TableDescription extends Omit<TableSummary, "columns"> {
  columns: {
    name: string;
    type: string;
    nullable: boolean;
    default: string | null;
    comment: string | null;
  }[];
  constraints: { name: string; type: string; definition: string }[];
  indexes: { name: string; unique: boolean; primary: boolean; definition: string }[];
}

export async function listTables(session: ProxySession) {
  const { result, costMicro } = await session.statement(LIST_TABLES, [], MAX_TABLES);
  return { tables: result.rows as unknown as TableSummary[], truncated: result.truncated, costMicro };
}

/** `table` as SQL names it (`orders`, `sales.orders`, `"Mixed Case"`); null when no readable relation has it. */
export async function describeTable(session: ProxySession, table: string) {
  const { result, costMicro } = await session.statement(DESCRIBE_TABLE, [table], 1);
  const row = result.rows[0] as unknown as TableDescription | undefined;
  if (!row) return { table: null, costMicro };
  return {
    table: {
      ...row,
      columns: row.columns ?? [],
      constraints: row.constraints ?? [],
      indexes: row.indexes ?? [],
    },
    costMicro,
  };
}
