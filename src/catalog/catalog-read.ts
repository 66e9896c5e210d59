import type pg from "pg";
import { formatPricePer1000Rows } from "../billing/cost.js";
import { formatMicro } from "../billing/money.js";
import type { CatalogTable } from "./introspect.js";
import type { TableNotes } from "./listing.js";

/**
 * The public catalog, read from pgtoll's own database only (a provider's database is never read per request).
 * What it returns is chosen column by column: no connection string, host, role, database name, API key, email,
 * wallet, agent, earning or row value can reach an answer.
 */

export const CATALOG_PAGE = { default: 20, max: 100 } as const;
/** Tables named in a search result's summary; the profile has them all. */
const SUMMARY_TABLES = 20;

export interface CatalogSearch {
  q?: string;
  tag?: string;
  /** Micro-USDC: providers whose every row price (base and per table, markup applied) is at most this. */
  maxMicroPer1000Rows?: bigint;
  limit: number;
  cursor?: string;
}

export class CatalogCursorError extends Error {
  override name = "CatalogCursorError";
}

interface Position {
  rank: number;
  id: string;
}

function encodeCursor(position: Position): string {
  return Buffer.from(JSON.stringify([position.rank, position.id])).toString("base64url");
}

function decodeCursor(cursor: string): Position {
  try {
    const [rank, id] = JSON.parse(Buffer.from(cursor, "base64url").toString()) as unknown[];
    if (
      typeof rank === "number" &&
      Number.isFinite(rank) &&
      typeof id === "string" &&
      /^[0-9a-f-]{36}$/.test(id)
    )
      return { rank, id };
  } catch {}
  throw new CatalogCursorError("invalid cursor: pass the nextCursor of a previous answer unchanged");
}

/** What the catalog reads of a listing, its pricing and its tables. */
const LISTING_COLUMNS = `l.provider_id, l.name, l.description, l.tags, l.table_descriptions, l.refreshed_at,
  pr.price_micro_per_1000_rows, pr.markup_ppm, pr.minimum_micro_per_statement, pr.price_micro_per_mb,
  pr.price_micro_per_second, pr.table_prices, pr.read_only, pr.max_rows_written_per_statement, pr.lock_timeout_ms,
  pr.idle_in_transaction_timeout_ms`;

interface CatalogRow {
  provider_id: string;
  name: string;
  description: string;
  tags: string[];
  table_descriptions: Record<string, TableNotes>;
  refreshed_at: Date | null;
  price_micro_per_1000_rows: bigint | string;
  markup_ppm: bigint | string;
  minimum_micro_per_statement: bigint | string;
  price_micro_per_mb: bigint | string;
  price_micro_per_second: bigint | string;
  table_prices: Record<string, string>;
  read_only: boolean;
  max_rows_written_per_statement: number;
  lock_timeout_ms: number;
  idle_in_transaction_timeout_ms: number;
}

/** Terms every agent of the gateway runs under, beside the provider's own. */
export interface GatewayTerms {
  statementTimeoutMs: number;
  rowCap: number;
}

const usdcOfPico = (pico: bigint) => formatPricePer1000Rows({ picoUsdcPer1000Rows: pico });

/** Every price of a provider as agents pay it (markup applied), exact USDC text. */
function presentPrices(row: CatalogRow) {
  const markup = BigInt(row.markup_ppm);
  return {
    pricePer1000Rows: usdcOfPico(BigInt(row.price_micro_per_1000_rows) * markup),
    minimumCostPerStatement: formatMicro(BigInt(row.minimum_micro_per_statement)),
    pricePerMB: usdcOfPico(BigInt(row.price_micro_per_mb) * markup),
    pricePerSecond: usdcOfPico(BigInt(row.price_micro_per_second) * markup),
    tablePricesPer1000Rows: Object.fromEntries(
      Object.entries(row.table_prices).map(([table, micro]) => [table, usdcOfPico(BigInt(micro) * markup)]),
    ),
  };
}

function presentTerms(row: CatalogRow, gateway: GatewayTerms) {
  return {
    readOnly: row.read_only,
    maxRowsWrittenPerStatement: row.read_only ? 0 : row.max_rows_written_per_statement,
    statementTimeoutMs: gateway.statementTimeoutMs,
    lockTimeoutMs: row.lock_timeout_ms,
    idleInTransactionTimeoutMs: row.idle_in_transaction_timeout_ms,
    maxRowsPerQuery: gateway.rowCap,
  };
}

function presentHead(row: CatalogRow, gateway: GatewayTerms) {
  return {
    id: row.provider_id,
    name: row.name,
    description: row.description,
    tags: row.tags,
    prices: presentPrices(row),
    terms: presentTerms(row, gateway),
    refreshedAt: row.refreshed_at ? row.refreshed_at.toISOString() : null,
  };
}

export type CatalogEntry = ReturnType<typeof presentHead> & { tables: { count: number; names: string[] } };

/**
 * One page of listed providers (those with a price), best match first with `q` (a table or column name before
 * the provider's name or tags, before a description), else newest listing first; `nextCursor` continues it.
 */
export async function searchCatalog(
  db: pg.Pool,
  search: CatalogSearch,
  gateway: GatewayTerms,
): Promise<{ providers: CatalogEntry[]; nextCursor: string | null }> {
  const params: unknown[] = [];
  const param = (value: unknown) => {
    params.push(value);
    return `$${params.length}`;
  };
  const where = ["l.listed"];
  let rank = "0::float8";
  const q = search.q?.trim();
  if (q) {
    const query = `websearch_to_tsquery('english', ${param(q)})`;
    where.push(`l.search @@ ${query}`);
    // The weight class of the best match first, then how well it matches within that class (normalised to [0, 1)).
    rank = `(CASE WHEN l.search_names @@ ${query} THEN 2 WHEN l.search_about @@ ${query} THEN 1 ELSE 0 END
             + ts_rank(l.search, ${query}, 32))::float8`;
  }
  if (search.tag) where.push(`l.tags @> ARRAY[${param(search.tag.trim().toLowerCase())}]::text[]`);
  if (search.maxMicroPer1000Rows !== undefined) {
    const maxPico = param(`${search.maxMicroPer1000Rows * 1_000_000n}`);
    where.push(`pr.price_micro_per_1000_rows::numeric * pr.markup_ppm <= ${maxPico}::numeric
      AND NOT EXISTS (SELECT 1 FROM jsonb_each_text(pr.table_prices) t
                       WHERE t.value::numeric * pr.markup_ppm > ${maxPico}::numeric)`);
  }
  // Without q every rank is 0 and the order is by id: stable under inserts, which is what a cursor needs.
  const order = q ? "rank DESC, provider_id" : "provider_id";
  const after: string[] = [];
  if (search.cursor) {
    const position = decodeCursor(search.cursor);
    const rankParam = param(position.rank);
    after.push(
      `WHERE (rank < ${rankParam}::float8 OR (rank = ${rankParam}::float8 AND provider_id > ${param(position.id)}::uuid))`,
    );
  }
  const limit = param(search.limit + 1);
  // The page is chosen first; its tables are summarised after, for its rows only.
  const { rows } = await db.query<
    CatalogRow & { rank: number; table_count: number; table_names: string[] | null }
  >(
    `SELECT page.*,
            (SELECT count(*)::int FROM provider_listing_tables t WHERE t.provider_id = page.provider_id) AS table_count,
            (SELECT array_agg(n ORDER BY n) FROM (
               SELECT CASE WHEN t.schema_name = 'public' THEN t.table_name ELSE t.schema_name || '.' || t.table_name END AS n
                 FROM provider_listing_tables t WHERE t.provider_id = page.provider_id
                ORDER BY t.schema_name, t.table_name LIMIT ${SUMMARY_TABLES}) s) AS table_names
       FROM (SELECT * FROM (
               SELECT ${LISTING_COLUMNS}, ${rank} AS rank
                 FROM provider_listings l JOIN pricing pr ON pr.provider_id = l.provider_id
                WHERE ${where.join(" AND ")}) ranked
             ${after.join("")}
             ORDER BY ${order} LIMIT ${limit}) page
      ORDER BY ${order}`,
    params,
  );
  const page = rows.slice(0, search.limit);
  const last = page.at(-1);
  return {
    providers: page.map((row) => ({
      ...presentHead(row, gateway),
      tables: { count: row.table_count, names: row.table_names ?? [] },
    })),
    nextCursor:
      rows.length > search.limit && last ? encodeCursor({ rank: last.rank, id: last.provider_id }) : null,
  };
}

/** A listed provider's profile: every shown table with its columns, types, row estimate and descriptions. */
export async function catalogProfile(db: pg.Pool, providerId: string, gateway: GatewayTerms) {
  const { rows } = await db.query<CatalogRow & { tables: CatalogTable[] }>(
    `SELECT ${LISTING_COLUMNS},
            coalesce((SELECT json_agg(json_build_object('schema', t.schema_name, 'name', t.table_name, 'kind', t.kind,
                        'approximateRows', t.approximate_rows, 'columns', t.columns) ORDER BY t.schema_name, t.table_name)
                      FROM provider_listing_tables t WHERE t.provider_id = l.provider_id), '[]') AS tables
       FROM provider_listings l JOIN pricing pr ON pr.provider_id = l.provider_id
      WHERE l.provider_id = $1 AND l.listed`,
    [providerId],
  );
  const row = rows[0];
  if (!row) return null;
  return {
    ...presentHead(row, gateway),
    tables: row.tables.map((table) => {
      const notes = notesOf(row.table_descriptions, table);
      return {
        schema: table.schema,
        name: table.name,
        kind: table.kind,
        approximateRows: table.approximateRows === null ? null : Number(table.approximateRows),
        description: notes?.description ?? "",
        columns: table.columns.map((column) => ({
          name: column.name,
          type: column.type,
          description: notes?.columns?.[column.name] ?? "",
        })),
      };
    }),
  };
}

export type CatalogProfile = NonNullable<Awaited<ReturnType<typeof catalogProfile>>>;

function notesOf(descriptions: Record<string, TableNotes>, table: CatalogTable): TableNotes | undefined {
  return descriptions[`${table.schema}.${table.name}`] ?? descriptions[table.name];
}
