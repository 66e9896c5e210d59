import type { FastifyBaseLogger } from "fastify";
import type pg from "pg";
import { findProvider, type ProviderWithSecrets } from "../providers/registry.js";
import type { UpstreamPools } from "../providers/upstream-pools.js";
import { type CatalogTable, namesTable, readProviderTables } from "./introspect.js";
import { LISTING_LIMITS, type ListingSettings } from "./listing.js";
import { findListing, listingsToRefresh, saveTables } from "./listing-store.js";

/** The longest the catalog's read of a provider's system catalogs may run. */
export const CATALOG_READ_TIMEOUT_MS = 5_000;

export interface CatalogSources {
  db: pg.Pool;
  upstream: UpstreamPools;
}

/**
 * The tables a listing shows, read from the provider's database through its registered role (read-only, bounded
 * in time and size): those it names in `shownTables`, else every one its role can read.
 */
export async function readListingTables(
  sources: CatalogSources,
  provider: ProviderWithSecrets,
  settings: Pick<ListingSettings, "shownTables">,
): Promise<CatalogTable[]> {
  const readable = await readProviderTables(sources.upstream.get(provider, true), {
    timeoutMs: CATALOG_READ_TIMEOUT_MS,
    // Shown tables are picked among more than the listing may show, so that one past the first 200 can be shown.
    maxTables: settings.shownTables ? LISTING_LIMITS.tables * 10 : LISTING_LIMITS.tables,
  });
  const shown = settings.shownTables;
  if (!shown) return readable;
  return readable
    .filter((table) => shown.some((name) => namesTable(name, table)))
    .slice(0, LISTING_LIMITS.tables);
}

/** Why a read of a provider's database failed, as the provider may read it (never the connection string). */
export function refreshFailure(error: unknown): string {
  const code = (error as { code?: string }).code;
  const message = error instanceof Error ? error.message : String(error);
  return `could not read the tables of the provider's database: ${code ? `${message} (SQLSTATE ${code})` : "it could not be reached"}`.slice(
    0,
    500,
  );
}

/**
 * Reads a listed provider's tables again and stores them; a database that cannot be read keeps its last tables
 * and their date, with the error.
 */
export async function refreshListing(sources: CatalogSources, providerId: string): Promise<void> {
  const [provider, listing] = await Promise.all([
    findProvider(sources.db, providerId),
    findListing(sources.db, providerId),
  ]);
  if (!provider || !listing) return;
  try {
    await saveTables(sources.db, providerId, { tables: await readListingTables(sources, provider, listing) });
  } catch (error) {
    await saveTables(sources.db, providerId, { refreshError: refreshFailure(error) });
  }
}

/**
 * Reads listed providers' tables again every `intervalMs`, a few at a time (those read longest ago first), so a
 * catalog of many providers is refreshed steadily rather than all at once. Returns the stop function.
 */
export function scheduleListingRefresh(
  sources: CatalogSources,
  intervalMs: number,
  logger: FastifyBaseLogger,
  perTick = 20,
): () => void {
  let running = false;
  const tick = async () => {
    if (running) return;
    running = true;
    try {
      const due = await listingsToRefresh(sources.db, new Date(Date.now() - intervalMs), perTick);
      for (const providerId of due) await refreshListing(sources, providerId);
    } catch (error) {
      logger.warn({ err: error }, "could not refresh the catalog's listings");
    } finally {
      running = false;
    }
  };
  const timer = setInterval(() => void tick(), Math.max(1000, Math.min(60_000, intervalMs / 10)));
  timer.unref();
  return () => clearInterval(timer);
}
