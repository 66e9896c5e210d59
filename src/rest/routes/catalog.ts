import { Type } from "@sinclair/typebox";
import type { FastifyInstance } from "fastify";
import { parseMicro } from "../../billing/money.js";
import {
  CATALOG_PAGE,
  CatalogCursorError,
  catalogProfile,
  searchCatalog,
} from "../../catalog/catalog-read.js";
import { type CatalogTable, namesTable } from "../../catalog/introspect.js";
import { ListingError, type ListingSettings, parseListing } from "../../catalog/listing.js";
import { findListing, type StoredListing, saveListing } from "../../catalog/listing-store.js";
import { readListingTables, refreshFailure, scheduleListingRefresh } from "../../catalog/refresh.js";
import { parseTableName } from "../../guard/relation-names.js";
import { createVerdictCache, withReadOnlyVerdicts } from "../../guard/verdict-cache.js";
import { ProviderCache } from "../../providers/provider-cache.js";
import type { ProviderWithSecrets } from "../../providers/registry.js";
import {
  CatalogPage,
  CatalogProfile,
  CatalogQuery,
  Listing,
  ListingBody,
  Quote,
  QuoteBody,
} from "../catalog-schemas.js";
import type { GatewayContext } from "../context.js";
import { EstimateCache } from "../estimate-cache.js";
import { HttpError } from "../plugins/errors.js";
import { gatewayLimits } from "../plugins/rate-limit.js";
import { authenticatedProvider } from "../provider-key.js";
import { QuoteError, quoteQuery } from "../query-quote.js";
import { ErrorBody } from "../schemas.js";

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

function presentListing(listing: StoredListing) {
  return {
    providerId: listing.providerId,
    listed: listing.listed,
    name: listing.name,
    description: listing.description,
    tags: listing.tags,
    tableDescriptions: listing.tableDescriptions,
    shownTables: listing.shownTables,
    refreshedAt: listing.refreshedAt?.toISOString() ?? null,
    refreshError: listing.refreshError,
    tables: listing.tables.map((table) => ({
      ...table,
      approximateRows: table.approximateRows === null ? null : Number(table.approximateRows),
      description: "",
      columns: table.columns.map((column) => ({ ...column, description: "" })),
    })),
  };
}

/** The table names a listing uses, as SQL reads them; 400 for one that is not a plain `[schema.]table` name. */
function namedTables(settings: ListingSettings): { written: string; key: string }[] {
  const written = [...(settings.shownTables ?? []), ...Object.keys(settings.tableDescriptions)];
  return written.map((name) => {
    const key = parseTableName(name);
    if (key === null)
      throw new HttpError(400, `invalid listing: "${name.slice(0, 200)}" is not a table name`);
    return { written: name, key };
  });
}

/** 400 naming the tables a listing names that are not among `tables`. */
function refuseUnknownTables(named: { written: string; key: string }[], tables: CatalogTable[], how: string) {
  const unknown = named.filter(({ key }) => !tables.some((table) => namesTable(key, table)));
  if (unknown.length > 0)
    throw new HttpError(
      400,
      `invalid listing: unknown tables ${unknown.map(({ written }) => JSON.stringify(written)).join(", ")} (${how})`,
    );
}

/** Listing keys as SQL reads them, so that the catalog matches `"Mixed Case"` and `public.airports` alike. */
function normalised(settings: ListingSettings): ListingSettings {
  return {
    ...settings,
    shownTables: settings.shownTables?.map((name) => parseTableName(name) ?? name) ?? null,
    tableDescriptions: Object.fromEntries(
      Object.entries(settings.tableDescriptions).map(([name, notes]) => [
        parseTableName(name) ?? name,
        notes,
      ]),
    ),
  };
}

/**
 * The catalog: a provider's listing (`PUT/GET /api/providers/:id/listing`, with its API key), the public catalog
 * (`GET /api/providers`, `GET /api/providers/:id`), read from pgtoll's database only, and the quote
 * (`POST /api/providers/:id/quote`). Listed providers' tables are read again every catalogRefreshIntervalMs.
 */
export async function catalogRoutes(app: FastifyInstance, { ctx }: { ctx: GatewayContext }) {
  const sources = { db: ctx.db, upstream: ctx.upstream };
  const gatewayTerms = { statementTimeoutMs: ctx.config.statementTimeoutMs, rowCap: ctx.config.rowCap };
  if (ctx.config.catalogRefreshIntervalMs > 0) {
    const stop = scheduleListingRefresh(sources, ctx.config.catalogRefreshIntervalMs, app.log);
    app.addHook("onClose", async () => stop());
  }
  const providers = new ProviderCache(ctx.db);
  const check = createVerdictCache(ctx.policy);
  const readOnlyCheck = withReadOnlyVerdicts(check);
  const estimates = new EstimateCache();

  const IdParams = Type.Object({ id: Type.String({ maxLength: 100 }) });
  const ProviderKey = Type.Object({ "x-api-key": Type.Optional(Type.String()) });

  app.put<{ Params: { id: string }; Body: ListingBody }>(
    "/api/providers/:id/listing",
    {
      schema: {
        summary: "Set the provider's catalog listing",
        tags: ["providers"],
        params: IdParams,
        headers: ProviderKey,
        body: ListingBody,
        response: { 200: Listing, 400: ErrorBody, 401: ErrorBody, 404: ErrorBody },
      },
    },
    async (request) => {
      const provider = await authenticatedProvider(ctx, request, request.params.id);
      let settings: ListingSettings;
      try {
        settings = parseListing(request.body, provider.name);
      } catch (error) {
        if (error instanceof ListingError) throw new HttpError(400, `invalid listing: ${error.message}`);
        throw error;
      }
      const named = namedTables(settings);
      settings = normalised(settings);
      return presentListing(await saveWithTables(provider, settings, named));
    },
  );

  /** Reads the provider's tables to check the names the listing uses and saves it with them. */
  async function saveWithTables(
    provider: ProviderWithSecrets,
    settings: ListingSettings,
    named: { written: string; key: string }[],
  ): Promise<StoredListing> {
    let readable: CatalogTable[];
    try {
      readable = await readListingTables(sources, provider, { shownTables: null });
    } catch (error) {
      const stored = await findListing(ctx.db, provider.id);
      refuseUnknownTables(named, stored?.tables ?? [], "your database could not be read to check them");
      return saveListing(ctx.db, provider.id, settings, { refreshError: refreshFailure(error) });
    }
    refuseUnknownTables(named, readable, "not among the tables the registered role can read");
    const shown = settings.shownTables
      ? await readListingTables(sources, provider, settings).catch(() =>
          readable.filter((table) => settings.shownTables!.some((name) => namesTable(name, table))),
        )
      : readable;
    return saveListing(ctx.db, provider.id, settings, { tables: shown });
  }

  app.get<{ Params: { id: string } }>(
    "/api/providers/:id/listing",
    {
      config: { rateLimit: gatewayLimits.analytics },
      schema: {
        summary: "The provider's catalog listing, as it set it and as last read from its database",
        tags: ["providers"],
        params: IdParams,
        headers: ProviderKey,
        response: { 200: Listing, 400: ErrorBody, 401: ErrorBody, 404: ErrorBody },
      },
    },
    async (request) => {
      const provider = await authenticatedProvider(ctx, request, request.params.id);
      const listing = await findListing(ctx.db, provider.id);
      return presentListing(
        listing ?? {
          providerId: provider.id,
          ...parseListing({}, provider.name),
          refreshedAt: null,
          refreshError: null,
          updatedAt: new Date(),
          tables: [],
        },
      );
    },
  );

  app.get<{ Querystring: CatalogQuery }>(
    "/api/providers",
    {
      schema: {
        summary: "The catalog: listed providers, their prices, terms and tables; searchable",
        tags: ["catalog"],
        querystring: CatalogQuery,
        response: { 200: CatalogPage, 400: ErrorBody },
      },
    },
    async (request) => {
      const { q, tag, maxPricePer1000Rows, limit, cursor } = request.query;
      const pageSize = limit === undefined ? CATALOG_PAGE.default : Number(limit);
      if (!/^\d+$/.test(limit ?? "1") || pageSize < 1 || pageSize > CATALOG_PAGE.max)
        throw new HttpError(400, `invalid limit: expected a whole number from 1 to ${CATALOG_PAGE.max}`);
      let maxMicro: bigint | undefined;
      if (maxPricePer1000Rows !== undefined) {
        const parsed = parseMicro(maxPricePer1000Rows.trim());
        if (parsed === null || parsed < 0n)
          throw new HttpError(
            400,
            'invalid maxPricePer1000Rows: expected a USDC amount with at most 6 decimals, e.g. "0.05"',
          );
        maxMicro = parsed;
      }
      try {
        return await searchCatalog(
          ctx.db,
          { q, tag, maxMicroPer1000Rows: maxMicro, limit: pageSize, cursor },
          gatewayTerms,
        );
      } catch (error) {
        if (error instanceof CatalogCursorError) throw new HttpError(400, error.message);
        throw error;
      }
    },
  );

  app.get<{ Params: { id: string } }>(
    "/api/providers/:id",
    {
      schema: {
        summary: "A listed provider's profile: prices, terms, tables, columns and their types",
        tags: ["catalog"],
        params: IdParams,
        response: { 200: CatalogProfile, 400: ErrorBody, 404: ErrorBody },
      },
    },
    async (request) => {
      const id = request.params.id;
      if (!UUID.test(id)) throw new HttpError(400, "invalid provider id: expected a UUID");
      const profile = await catalogProfile(ctx.db, id.toLowerCase(), gatewayTerms);
      // The same answer for an unlisted provider as for none: the catalog does not tell that one exists.
      if (!profile) throw new HttpError(404, `provider ${id.toLowerCase()} is not in the catalog`);
      return profile;
    },
  );

  app.post<{ Params: { id: string }; Body: QuoteBody }>(
    "/api/providers/:id/quote",
    {
      config: { rateLimit: gatewayLimits.query },
      schema: {
        summary: "What a query would cost and whether the provider's policy allows it, without running it",
        tags: ["catalog"],
        params: IdParams,
        body: QuoteBody,
        response: { 200: Quote, 400: ErrorBody, 404: ErrorBody, 503: ErrorBody },
      },
    },
    async (request) => {
      const id = request.params.id;
      if (!UUID.test(id)) throw new HttpError(400, "invalid provider id: expected a UUID");
      const found = await providers.find(id.toLowerCase());
      if (!found?.pricing)
        throw new HttpError(404, `provider ${id.toLowerCase()} not found or has no pricing yet`);
      try {
        const quote = await quoteQuery(
          {
            check: found.pricing.readOnly ? readOnlyCheck : check,
            estimates,
            reader: ctx.upstream.get(found.provider, true),
            statementTimeoutMs: ctx.config.statementTimeoutMs,
          },
          {
            providerId: found.provider.id,
            sql: request.body.sql,
            params: request.body.params,
            price: found.pricing.price,
          },
        );
        if (!quote.allowed) return quote;
        const { estimatedCostMicro: _micro, ...view } = quote;
        return view;
      } catch (error) {
        if (error instanceof QuoteError) throw new HttpError(error.statusCode, error.message);
        throw error;
      }
    },
  );
}
