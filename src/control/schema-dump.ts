import type pg from "pg";
import { projectFor } from "./access.js";
import { badRequest, notFound } from "./control-error.js";
import { getBranch } from "./lookups.js";
import type { Plane } from "./plane.js";
import type { Principal } from "./principal.js";

/**
 * A branch database's schema as SQL text in the form of `pg_dump --schema-only` (a comment header per object,
 * then its definition), built from the catalog with PostgreSQL's own deparsers (`pg_get_constraintdef`,
 * `pg_get_indexdef`, `pg_get_viewdef`, `pg_get_functiondef`, `pg_get_triggerdef`, `format_type`). A pg_dump
 * binary of the cluster's major version is not always at hand (the embedded cluster ships none), and what
 * clients do with this text, `neonctl branches schema-diff`, is compare two of them. Objects of extensions are
 * left to their `CREATE EXTENSION`; ownership and privileges are not part of it; objects come in a fixed order
 * (kind, then schema and name), so the same schema always gives the same text.
 */
export async function dumpSchema(client: pg.Client): Promise<string> {
  // One snapshot for every catalog read, and names qualified as pg_dump prints them (an empty search_path).
  await client.query("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY");
  try {
    await client.query("SELECT pg_catalog.set_config('search_path', '', true)");
    return await dumpCatalog(client);
  } finally {
    await client.query("COMMIT").catch(() => {});
  }
}

async function dumpCatalog(client: pg.Client): Promise<string> {
  const parts: string[] = [];
  const emit = (name: string, type: string, schema: string, sql: string) =>
    parts.push(`--\n-- Name: ${name}; Type: ${type}; Schema: ${schema}; Owner: -\n--\n\n${sql.trim()}\n`);
  const rows = async (sql: string) => (await client.query(sql)).rows as Record<string, string>[];

  for (const r of await rows(
    "SELECT e.extname AS name, quote_ident(e.extname) AS qname, quote_ident(n.nspname) AS qschema FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname <> 'plpgsql' ORDER BY 1",
  ))
    emit(r.name!, "EXTENSION", "-", `CREATE EXTENSION IF NOT EXISTS ${r.qname} WITH SCHEMA ${r.qschema};`);
  for (const r of await rows(
    `SELECT n.nspname AS name, quote_ident(n.nspname) AS qname FROM pg_namespace n WHERE ${USER_SCHEMA} AND n.nspname <> 'public' AND ${NOT_EXTENSION("n.oid")} ORDER BY 1`,
  ))
    emit(r.name!, "SCHEMA", "-", `CREATE SCHEMA ${r.qname};`);
  for (const r of await rows(`SELECT n.nspname AS schema, t.typname AS name, format('%I.%I', n.nspname, t.typname) AS qualified,
        string_agg(quote_literal(e.enumlabel), ', ' ORDER BY e.enumsortorder) AS labels
      FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace JOIN pg_enum e ON e.enumtypid = t.oid
      WHERE ${USER_SCHEMA} AND ${NOT_EXTENSION("t.oid")} GROUP BY 1, 2 ORDER BY 1, 2`))
    emit(
      r.name!,
      "TYPE",
      r.schema!,
      `CREATE TYPE ${r.qualified} AS ENUM (\n    ${r.labels!.split(", ").join(",\n    ")}\n);`,
    );
  for (const r of await rows(`SELECT n.nspname AS schema, t.typname AS name, format('%I.%I', n.nspname, t.typname) AS qualified,
        format_type(t.typbasetype, t.typtypmod) AS base,
        CASE WHEN t.typnotnull THEN ' NOT NULL' ELSE '' END AS notnull,
        coalesce((SELECT string_agg(' ' || pg_get_constraintdef(c.oid), '' ORDER BY c.conname) FROM pg_constraint c WHERE c.contypid = t.oid), '') AS checks
      FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace
      WHERE t.typtype = 'd' AND ${USER_SCHEMA} AND ${NOT_EXTENSION("t.oid")} ORDER BY 1, 2`))
    emit(r.name!, "DOMAIN", r.schema!, `CREATE DOMAIN ${r.qualified} AS ${r.base}${r.notnull}${r.checks};`);
  for (const r of await rows(`SELECT n.nspname AS schema, c.relname AS name, format('%I.%I', n.nspname, c.relname) AS qualified,
        format_type(s.seqtypid, NULL) AS type,
        s.seqstart, s.seqincrement, s.seqmin, s.seqmax, s.seqcache, s.seqcycle
      FROM pg_sequence s JOIN pg_class c ON c.oid = s.seqrelid JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE ${USER_SCHEMA} AND ${NOT_EXTENSION("c.oid")}
        AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.objid = c.oid AND d.deptype = 'i') ORDER BY 1, 2`))
    emit(
      r.name!,
      "SEQUENCE",
      r.schema!,
      `CREATE SEQUENCE ${r.qualified}\n    AS ${r.type}\n    START WITH ${r.seqstart}\n    INCREMENT BY ${r.seqincrement}\n    MINVALUE ${r.seqmin}\n    MAXVALUE ${r.seqmax}\n    CACHE ${r.seqcache}${String(r.seqcycle) === "true" ? "\n    CYCLE" : ""};`,
    );
  for (const table of await rows(`SELECT c.oid, n.nspname AS schema, c.relname AS name, c.relkind,
        format('%I.%I', n.nspname, c.relname) AS qualified,
        CASE WHEN c.relkind = 'p' THEN ' PARTITION BY ' || pg_get_partkeydef(c.oid) ELSE '' END AS partitioning,
        CASE WHEN c.relispartition THEN (SELECT format('%I.%I', pn.nspname, pc.relname) FROM pg_inherits i
          JOIN pg_class pc ON pc.oid = i.inhparent JOIN pg_namespace pn ON pn.oid = pc.relnamespace WHERE i.inhrelid = c.oid)
          || ' ' || pg_get_expr(c.relpartbound, c.oid) END AS partition_of,
        (SELECT string_agg('    ' || quote_ident(a.attname) || ' ' || format_type(a.atttypid, a.atttypmod)
            || CASE WHEN a.attidentity = 'a' THEN ' GENERATED ALWAYS AS IDENTITY'
                    WHEN a.attidentity = 'd' THEN ' GENERATED BY DEFAULT AS IDENTITY'
                    WHEN a.attgenerated = 's' THEN ' GENERATED ALWAYS AS (' || pg_get_expr(ad.adbin, ad.adrelid) || ') STORED'
                    WHEN ad.adbin IS NOT NULL THEN ' DEFAULT ' || pg_get_expr(ad.adbin, ad.adrelid) ELSE '' END
            || CASE WHEN a.attnotnull AND a.attidentity = '' THEN ' NOT NULL' ELSE '' END, E',\\n' ORDER BY a.attnum)
           FROM pg_attribute a LEFT JOIN pg_attrdef ad ON ad.adrelid = a.attrelid AND ad.adnum = a.attnum
          WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped) AS columns
      FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE c.relkind IN ('r', 'p') AND ${USER_SCHEMA} AND ${NOT_EXTENSION("c.oid")}
      ORDER BY c.relispartition, 2, 3`))
    emit(
      table.name!,
      "TABLE",
      table.schema!,
      table.partition_of
        ? `CREATE TABLE ${table.qualified} PARTITION OF ${table.partition_of}${table.partitioning};`
        : `CREATE TABLE ${table.qualified} (\n${table.columns ?? ""}\n)${table.partitioning};`,
    );
  for (const r of await rows(`SELECT p.oid, n.nspname AS schema, p.proname AS name,
        pg_get_function_identity_arguments(p.oid) AS args, pg_get_functiondef(p.oid) AS def
      FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
      WHERE p.prokind IN ('f', 'p') AND ${USER_SCHEMA} AND ${NOT_EXTENSION("p.oid")} ORDER BY 2, 3, 4`))
    emit(`${r.name}(${r.args})`, "FUNCTION", r.schema!, `${r.def!.trim()};`);
  for (const r of await rows(`SELECT n.nspname AS schema, c.relname AS name, c.relkind, pg_get_viewdef(c.oid, true) AS def,
        format('%I.%I', n.nspname, c.relname) AS qualified
      FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE c.relkind IN ('v', 'm') AND ${USER_SCHEMA} AND ${NOT_EXTENSION("c.oid")} ORDER BY 2, 3`))
    emit(
      r.name!,
      r.relkind === "m" ? "MATERIALIZED VIEW" : "VIEW",
      r.schema!,
      `CREATE ${r.relkind === "m" ? "MATERIALIZED VIEW" : "VIEW"} ${r.qualified} AS\n${r.def!.trim().replace(/;$/, "")}${r.relkind === "m" ? "\n  WITH NO DATA" : ""};`,
    );
  // Primary keys, unique and check constraints before foreign keys, which may need them.
  for (const r of await rows(`SELECT n.nspname AS schema, c.relname AS table, k.conname AS name, k.contype,
        pg_get_constraintdef(k.oid) AS def, format('%I.%I', n.nspname, c.relname) AS qualified, quote_ident(k.conname) AS qname
      FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE k.contype IN ('p', 'u', 'c', 'x', 'f') AND k.conislocal AND ${USER_SCHEMA} AND ${NOT_EXTENSION("c.oid")}
      ORDER BY k.contype = 'f', 1, 2, 3`))
    emit(
      `${r.table} ${r.name}`,
      r.contype === "f" ? "FK CONSTRAINT" : "CONSTRAINT",
      r.schema!,
      `ALTER TABLE ONLY ${r.qualified}\n    ADD CONSTRAINT ${r.qname} ${r.def};`,
    );
  for (const r of await rows(`SELECT n.nspname AS schema, ic.relname AS name, pg_get_indexdef(i.indexrelid) AS def
      FROM pg_index i JOIN pg_class ic ON ic.oid = i.indexrelid JOIN pg_class c ON c.oid = i.indrelid
      JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE ${USER_SCHEMA} AND ${NOT_EXTENSION("c.oid")}
        AND NOT EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conindid = i.indexrelid AND k.contype IN ('p', 'u', 'x'))
      ORDER BY 1, 2`))
    emit(r.name!, "INDEX", r.schema!, `${r.def};`);
  for (const r of await rows(`SELECT n.nspname AS schema, c.relname AS table, t.tgname AS name, pg_get_triggerdef(t.oid) AS def
      FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE NOT t.tgisinternal AND ${USER_SCHEMA} AND ${NOT_EXTENSION("c.oid")} ORDER BY 1, 2, 3`))
    emit(`${r.table} ${r.name}`, "TRIGGER", r.schema!, `${r.def};`);
  for (const r of await rows(`SELECT n.nspname AS schema, c.relname AS name, a.attname AS column, d.description,
        format('%I.%I', n.nspname, c.relname) || coalesce('.' || quote_ident(a.attname), '') AS target
      FROM pg_description d JOIN pg_class c ON c.oid = d.objoid AND d.classoid = 'pg_class'::regclass
      JOIN pg_namespace n ON n.oid = c.relnamespace
      LEFT JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = d.objsubid AND d.objsubid > 0
      WHERE ${USER_SCHEMA} AND ${NOT_EXTENSION("c.oid")} ORDER BY 1, 2, d.objsubid`))
    emit(
      r.column ? `COLUMN ${r.name}.${r.column}` : `TABLE ${r.name}`,
      "COMMENT",
      r.schema!,
      `COMMENT ON ${r.column ? "COLUMN" : "TABLE"} ${r.target} IS ${literal(r.description!)};`,
    );

  return `--\n-- PostgreSQL database dump\n--\n\n${parts.join("\n")}\n--\n-- PostgreSQL database dump complete\n--\n`;
}

/** Schemas of the database's own objects: not the system's, not another session's temporary ones. */
const USER_SCHEMA =
  "n.nspname NOT IN ('pg_catalog', 'information_schema', 'pg_toast') AND n.nspname NOT LIKE 'pg_temp_%' AND n.nspname NOT LIKE 'pg_toast_temp_%'";

/** The object is not a member of an extension (its `CREATE EXTENSION` makes it). */
function NOT_EXTENSION(oid: string): string {
  return `NOT EXISTS (SELECT 1 FROM pg_depend x WHERE x.objid = ${oid} AND x.deptype = 'e')`;
}

function literal(text: string): string {
  return `'${text.replaceAll("'", "''")}'`;
}

/**
 * `GET /projects/{id}/branches/{id}/schema`: the schema of one of the branch's databases, by its API name.
 * There is no history, so a point in time (`lsn`, `timestamp`) is refused; `format` is `sql` only.
 */
export async function branchSchema(
  plane: Pick<Plane, "db" | "cluster">,
  principal: Principal,
  projectId: string,
  branchId: string,
  query: { db_name: string; lsn?: string; timestamp?: string; format?: string },
): Promise<string> {
  await projectFor(plane.db, principal, projectId);
  await getBranch(plane.db, projectId, branchId);
  if (query.lsn !== undefined || query.timestamp !== undefined)
    throw badRequest(
      "a schema at an lsn or timestamp is not available: pgtoll keeps no history; omit lsn and timestamp",
    );
  if (query.format !== undefined && query.format !== "sql")
    throw badRequest(`format must be sql, got "${query.format}" (json is not offered)`);
  const { rows } = await plane.db.query(
    "SELECT physical_name FROM branch_databases WHERE branch_id = $1 AND name = $2",
    [branchId, query.db_name],
  );
  if (!rows[0]) throw notFound(`database ${query.db_name} not found on branch ${branchId}`);
  return plane.cluster.withDatabase(rows[0].physical_name as string, dumpSchema);
}
