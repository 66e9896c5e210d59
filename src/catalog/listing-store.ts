import type pg from "pg";
import { inTransaction } from "../control/sql.js";
import type { CatalogTable } from "./introspect.js";
import type { ListingSettings, TableNotes } from "./listing.js";

/** A listing as stored, with what was last read from the provider's database. */
export interface StoredListing extends ListingSettings {
  providerId: string;
  refreshedAt: Date | null;
  refreshError: string | null;
  updatedAt: Date;
  tables: CatalogTable[];
}

interface ListingRow {
  provider_id: string;
  listed: boolean;
  name: string;
  description: string;
  tags: string[];
  table_descriptions: Record<string, TableNotes>;
  shown_tables: string[] | null;
  refreshed_at: Date | null;
  refresh_error: string | null;
  updated_at: Date;
  tables: CatalogTable[] | null;
}

const TABLES_JSON = `coalesce((SELECT json_agg(json_build_object('schema', t.schema_name, 'name', t.table_name,
    'kind', t.kind, 'approximateRows', t.approximate_rows, 'columns', t.columns)
    ORDER BY t.schema_name, t.table_name)
  FROM provider_listing_tables t WHERE t.provider_id = l.provider_id), '[]')`;

function toListing(row: ListingRow): StoredListing {
  return {
    providerId: row.provider_id,
    listed: row.listed,
    name: row.name,
    description: row.description,
    tags: row.tags,
    tableDescriptions: row.table_descriptions,
    shownTables: row.shown_tables,
    refreshedAt: row.refreshed_at,
    refreshError: row.refresh_error,
    updatedAt: row.updated_at,
    tables: row.tables ?? [],
  };
}

export async function findListing(
  db: pg.Pool | pg.ClientBase,
  providerId: string,
): Promise<StoredListing | null> {
  const { rows } = await db.query<ListingRow>(
    `SELECT l.*, ${TABLES_JSON} AS tables FROM provider_listings l WHERE l.provider_id = $1`,
    [providerId],
  );
  return rows[0] ? toListing(rows[0]) : null;
}

/** Table, schema and column names of a listing's stored tables, each word once, as a search vector. */
const NAMES_VECTOR = `strip(to_tsvector('english', coalesce((SELECT string_agg(DISTINCT w, ' ') FROM (
    SELECT t.table_name AS w FROM provider_listing_tables t WHERE t.provider_id = l.provider_id
    UNION SELECT t.schema_name FROM provider_listing_tables t WHERE t.provider_id = l.provider_id
    UNION SELECT c->>'name' FROM provider_listing_tables t, jsonb_array_elements(t.columns) c
     WHERE t.provider_id = l.provider_id) words), '')))`;

const ABOUT_VECTOR = `strip(to_tsvector('english', l.name || ' ' || array_to_string(l.tags, ' ')))`;

const TEXT_VECTOR = `strip(to_tsvector('english', l.description || ' ' || coalesce((SELECT string_agg(
    coalesce(d.value->>'description', '') || ' ' ||
    coalesce((SELECT string_agg(c.value, ' ') FROM jsonb_each_text(coalesce(d.value->'columns', '{}')) c), ''),
    ' ') FROM jsonb_each(l.table_descriptions) d), '')))`;

/**
 * The search vectors of a listing, from its own texts and its stored tables: the catalog ranks a match by the
 * class it is in (catalog-read.ts): table and column names, then the name and tags, then descriptions, so a
 * table-name match comes before a description match whatever the description repeats.
 */
const SEARCH_VECTORS = `search_names = ${NAMES_VECTOR}, search_about = ${ABOUT_VECTOR},
  search = ${NAMES_VECTOR} || ${ABOUT_VECTOR} || ${TEXT_VECTOR}`;

/**
 * Saves a provider's listing settings and, when `tables` is given (a successful read of its database), replaces
 * its tables and marks the listing refreshed; a failed read (`refreshError`) keeps the tables and their date.
 * One transaction: the catalog never shows a listing with half its tables.
 */
export async function saveListing(
  db: pg.Pool,
  providerId: string,
  settings: ListingSettings,
  read: { tables: CatalogTable[] } | { refreshError: string },
): Promise<StoredListing> {
  await inTransaction(db, async (client) => {
    await client.query(
      `INSERT INTO provider_listings AS l (provider_id, listed, name, description, tags, table_descriptions, shown_tables)
       VALUES ($1, $2, $3, $4, $5, $6, $7)
       ON CONFLICT (provider_id) DO UPDATE SET listed = excluded.listed, name = excluded.name,
         description = excluded.description, tags = excluded.tags, table_descriptions = excluded.table_descriptions,
         shown_tables = excluded.shown_tables, updated_at = now()`,
      [
        providerId,
        settings.listed,
        settings.name,
        settings.description,
        settings.tags,
        JSON.stringify(settings.tableDescriptions),
        settings.shownTables,
      ],
    );
    await writeTables(client, providerId, read);
  });
  return (await findListing(db, providerId))!;
}

/** Replaces the stored tables of a listing after a read of the provider's database (or records its failure). */
export async function saveTables(
  db: pg.Pool,
  providerId: string,
  read: { tables: CatalogTable[] } | { refreshError: string },
): Promise<void> {
  await inTransaction(db, (client) => writeTables(client, providerId, read));
}

async function writeTables(
  client: pg.ClientBase,
  providerId: string,
  read: { tables: CatalogTable[] } | { refreshError: string },
): Promise<void> {
  if ("refreshError" in read) {
    await client.query(
      `UPDATE provider_listings l SET refresh_error = $2, ${SEARCH_VECTORS} WHERE provider_id = $1`,
      [providerId, read.refreshError],
    );
    return;
  }
  await client.query("DELETE FROM provider_listing_tables WHERE provider_id = $1", [providerId]);
  if (read.tables.length > 0)
    await client.query(
      `INSERT INTO provider_listing_tables (provider_id, schema_name, table_name, kind, approximate_rows, columns)
       SELECT $1, t.schema, t.name, t.kind, t."approximateRows", t.columns
         FROM jsonb_to_recordset($2::jsonb) AS t(schema text, name text, kind text, "approximateRows" bigint, columns jsonb)`,
      [providerId, JSON.stringify(read.tables)],
    );
  await client.query(
    `UPDATE provider_listings l SET refreshed_at = now(), refresh_error = NULL, ${SEARCH_VECTORS}
      WHERE provider_id = $1`,
    [providerId],
  );
}

/** Listed providers whose tables were last read before `olderThan` (or never), oldest first. */
export async function listingsToRefresh(db: pg.Pool, olderThan: Date, limit: number): Promise<string[]> {
  const { rows } = await db.query<{ provider_id: string }>(
    `SELECT provider_id FROM provider_listings
      WHERE listed AND (refreshed_at IS NULL OR refreshed_at < $1)
      ORDER BY refreshed_at NULLS FIRST LIMIT $2`,
    [olderThan, limit],
  );
  return rows.map((row) => row.provider_id);
}

/** A listed provider's name, description and tags (what its x402 declaration shows); null when not listed. */
export async function findListedSummary(
  db: pg.Pool,
  providerId: string,
): Promise<{ providerId: string; name: string; description: string; tags: string[] } | null> {
  const { rows } = await db.query<{ name: string; description: string; tags: string[] }>(
    "SELECT name, description, tags FROM provider_listings WHERE provider_id = $1 AND listed",
    [providerId],
  );
  return rows[0] ? { providerId, ...rows[0] } : null;
}

/** A page of listed, priced providers as x402 discovery lists them, oldest listing first, and how many there are. */
export async function listedForDiscovery(
  db: pg.Pool,
  page: { limit: number; offset: number; payTo?: string },
): Promise<{
  total: number;
  items: {
    providerId: string;
    name: string;
    description: string;
    tags: string[];
    walletAddress: string;
    updatedAt: Date;
  }[];
}> {
  const { rows } = await db.query<{
    provider_id: string;
    name: string;
    description: string;
    tags: string[];
    wallet_address: string;
    updated_at: Date;
    total: number;
  }>(
    `SELECT l.provider_id, l.name, l.description, l.tags, p.wallet_address,
            greatest(l.updated_at, pr.updated_at) AS updated_at, count(*) OVER ()::int AS total
       FROM provider_listings l JOIN providers p ON p.id = l.provider_id JOIN pricing pr ON pr.provider_id = l.provider_id
      WHERE l.listed AND ($3::text IS NULL OR lower(p.wallet_address) = lower($3))
      ORDER BY l.provider_id LIMIT $1 OFFSET $2`,
    [page.limit, page.offset, page.payTo ?? null],
  );
  return {
    total: rows[0]?.total ?? 0,
    items: rows.map((row) => ({
      providerId: row.provider_id,
      name: row.name,
      description: row.description,
      tags: row.tags,
      walletAddress: row.wallet_address,
      updatedAt: row.updated_at,
    })),
  };
}
