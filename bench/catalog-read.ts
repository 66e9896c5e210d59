import { randomBytes, randomUUID } from "node:crypto";
import { performance } from "node:perf_hooks";
import type pg from "pg";
import type { CatalogTable } from "../src/catalog/introspect.js";
import { saveListing } from "../src/catalog/listing-store.js";
import { percentile } from "./stats.js";

/** One kind of catalog request, timed one at a time over HTTP (keep-alive), after a warm-up. */
export interface CatalogCell {
  request: string;
  requests: number;
  p50Ms: number;
  p99Ms: number;
  /** Providers in the first page of the answer (a profile: its tables). */
  answered: number;
}

export interface CatalogResult {
  providers: number;
  tablesPerProvider: number;
  fillS: number;
  cells: CatalogCell[];
}

/** Words tables, columns and descriptions are made of: a query for one matches a share of the providers. */
const WORDS = [
  "airports",
  "flights",
  "routes",
  "weather",
  "stations",
  "prices",
  "stocks",
  "trades",
  "orders",
  "customers",
  "invoices",
  "payments",
  "products",
  "inventory",
  "shipments",
  "carriers",
  "vessels",
  "ports",
  "cities",
  "countries",
  "regions",
  "census",
  "households",
  "income",
  "elections",
  "votes",
  "candidates",
  "parties",
  "hospitals",
  "patients",
  "diagnoses",
  "drugs",
  "trials",
  "genes",
  "proteins",
  "species",
  "observations",
  "sensors",
  "readings",
  "energy",
  "plants",
  "emissions",
  "permits",
  "buildings",
  "parcels",
  "roads",
  "accidents",
  "vehicles",
  "registrations",
  "companies",
  "filings",
  "patents",
  "papers",
  "authors",
  "citations",
  "courses",
  "students",
  "grades",
  "schools",
  "teachers",
  "movies",
  "ratings",
  "reviews",
  "books",
  "songs",
  "artists",
  "albums",
  "games",
  "players",
  "teams",
  "matches",
  "seasons",
  "events",
];
const TAGS = ["aviation", "finance", "health", "geography", "retail", "energy", "science", "sports", "media"];
const COLUMNS = ["id", "name", "code", "created_at", "amount", "latitude", "longitude", "status"];

const word = (n: number) => WORDS[n % WORDS.length]!;

/**
 * Fills pgtoll's database with `providers` listed providers of `tables` tables each, as saved listings are
 * stored (search vectors included), each with a price; nothing reaches a provider's database.
 */
export async function fillCatalog(db: pg.Pool, providers: number, tables: number): Promise<void> {
  for (let i = 0; i < providers; i++) {
    const id = randomUUID();
    await db.query(
      `INSERT INTO providers (id, name, email, wallet_address, connection_secret, api_key_hash)
       VALUES ($1, $2, $3, $4, 'x', '\\x00')`,
      [id, `provider ${i}`, `${id}@example.com`, `0x${randomBytes(20).toString("hex")}`],
    );
    await db.query(
      `INSERT INTO pricing (id, provider_id, price_micro_per_1000_rows, markup_ppm) VALUES ($1, $2, $3, 1000000)`,
      [randomUUID(), id, 10_000 * (1 + (i % 20))],
    );
    const catalogTables: CatalogTable[] = Array.from({ length: tables }, (_, t) => ({
      schema: "public",
      name: `${word(i * 7 + t)}_${t}`,
      kind: "table",
      approximateRows: 1000 * (t + 1),
      columns: COLUMNS.map((column) => ({ name: column, type: column === "id" ? "integer" : "text" })),
    }));
    await saveListing(
      db,
      id,
      {
        listed: true,
        name: `${word(i)} and ${word(i + 3)} data ${i}`,
        description: `Open data about ${word(i + 11)}, ${word(i + 13)} and ${word(i + 17)}, refreshed daily.`,
        tags: [TAGS[i % TAGS.length]!, TAGS[(i + 4) % TAGS.length]!],
        tableDescriptions: { [catalogTables[0]!.name]: { description: `main table of ${word(i + 19)}` } },
        shownTables: null,
      },
      { tables: catalogTables },
    );
  }
  await db.query(
    "ANALYZE providers; ANALYZE pricing; ANALYZE provider_listings; ANALYZE provider_listing_tables",
  );
}

async function timeRequests(
  url: () => string,
  requests: number,
  count: (body: Record<string, unknown>) => number,
): Promise<{ p50Ms: number; p99Ms: number; answered: number }> {
  const times = new Float64Array(requests);
  let answered = 0;
  for (let i = -Math.ceil(requests / 10); i < requests; i++) {
    const started = performance.now();
    const response = await fetch(url());
    const body = (await response.json()) as Record<string, unknown>;
    if (!response.ok) throw new Error(`${url()}: ${response.status} ${JSON.stringify(body)}`);
    if (i >= 0) times[i] = performance.now() - started;
    answered = count(body);
  }
  times.sort();
  return { p50Ms: percentile(times, 50), p99Ms: percentile(times, 99), answered };
}

/**
 * The catalog's answer times with `providers` listed providers of `tables` tables each: a first page, a search
 * by one and by two words, a tag, a price ceiling, a later page, and a profile, each `requests` times in turn.
 */
export async function runCatalogRead(options: {
  httpUrl: string;
  db: pg.Pool;
  providers: number;
  tables: number;
  requests: number;
  log: (line: string) => void;
}): Promise<CatalogResult> {
  const { httpUrl, db, log } = options;
  const started = performance.now();
  await fillCatalog(db, options.providers, options.tables);
  const fillS = (performance.now() - started) / 1000;
  log(
    `catalog: ${options.providers} listed providers of ${options.tables} tables written in ${fillS.toFixed(1)} s`,
  );
  const pageCount = (body: Record<string, unknown>) => (body.providers as unknown[]).length;
  const second = (await (await fetch(`${httpUrl}/api/providers?q=weather`)).json()) as { nextCursor: string };
  const { rows } = await db.query<{ provider_id: string }>(
    "SELECT provider_id FROM provider_listings WHERE listed ORDER BY random() LIMIT 100",
  );
  let next = 0;
  const cases: [string, () => string, (body: Record<string, unknown>) => number][] = [
    ["first page", () => `${httpUrl}/api/providers`, pageCount],
    ["q=weather", () => `${httpUrl}/api/providers?q=weather`, pageCount],
    ["q=flights routes", () => `${httpUrl}/api/providers?q=flights%20routes`, pageCount],
    ["tag=energy", () => `${httpUrl}/api/providers?tag=energy`, pageCount],
    ["maxPricePer1000Rows=0.05", () => `${httpUrl}/api/providers?maxPricePer1000Rows=0.05`, pageCount],
    ["q=weather, page 2", () => `${httpUrl}/api/providers?q=weather&cursor=${second.nextCursor}`, pageCount],
    [
      "profile (50 tables)",
      () => `${httpUrl}/api/providers/${rows[next++ % rows.length]!.provider_id}`,
      (body) => (body.tables as unknown[]).length,
    ],
  ];
  const cells: CatalogCell[] = [];
  for (const [request, url, count] of cases) {
    const timed = await timeRequests(url, options.requests, count);
    cells.push({ request, requests: options.requests, ...timed });
    log(`catalog ${request}: p50 ${timed.p50Ms.toFixed(2)} ms, p99 ${timed.p99Ms.toFixed(2)} ms`);
  }
  return { providers: options.providers, tablesPerProvider: options.tables, fillS, cells };
}
