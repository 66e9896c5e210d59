import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { creditDeposit } from "../../src/billing/ledger.js";
import { refreshListing } from "../../src/catalog/refresh.js";
import { type OwnedTestDatabase, runSql } from "../support/database.js";
import { randomTxHash, randomWallet } from "../support/fixtures.js";
import {
  createProviderDatabase,
  registerPricedProvider,
  startTestGateway,
  type TestGateway,
} from "../support/gateway.js";

/** A value no catalog answer may contain: it is in a provider's rows only. */
const SECRET_ROW_VALUE = "zebra-row-value-5f1c9a";

let gateway: TestGateway;
const databases: OwnedTestDatabase[] = [];
/** A provider with a table named flights. */
let flights: { providerId: string; apiKey: string; walletAddress: string; db: OwnedTestDatabase };
/** A provider whose description speaks of flights, whose tables do not. */
let talker: { providerId: string; apiKey: string; walletAddress: string; db: OwnedTestDatabase };

async function provider(price = 1, extraSql = "") {
  const db = await createProviderDatabase(200);
  databases.push(db);
  if (extraSql) await runSql(extraSql, db.url);
  await runSql("ANALYZE", db.url);
  const registered = await registerPricedProvider(gateway, db.url, {
    basePricePer1000Rows: price,
    markupMultiplier: 1,
  });
  return { ...registered, db };
}

function putListing(id: string, apiKey: string, body: Record<string, unknown>) {
  return gateway.app.inject({
    method: "PUT",
    url: `/api/providers/${id}/listing`,
    headers: { "x-api-key": apiKey },
    payload: body,
  });
}

const get = (url: string) => gateway.app.inject({ method: "GET", url });

beforeAll(async () => {
  gateway = await startTestGateway({ env: { PGTOLL_CATALOG_REFRESH_INTERVAL_MS: "0" } });
  flights = await provider(
    2,
    `CREATE TABLE flights (id serial PRIMARY KEY, origin text, destination text);
     INSERT INTO flights (origin, destination) SELECT 'A', 'B' FROM generate_series(1, 30);
     INSERT INTO items (name) VALUES ('${SECRET_ROW_VALUE}');`,
  );
  talker = await provider(1);
  await runSql(`INSERT INTO items (name) VALUES ('${SECRET_ROW_VALUE}')`, talker.db.url);
  await runSql("ANALYZE", flights.db.url);
}, 60_000);
afterAll(async () => {
  await gateway?.close();
  for (const db of databases) await db.drop();
});

describe("a provider's listing", () => {
  it("is off until the provider lists itself; an unlisted provider is 404 like none", async () => {
    const listing = await gateway.app.inject({
      method: "GET",
      url: `/api/providers/${talker.providerId}/listing`,
      headers: { "x-api-key": talker.apiKey },
    });
    expect(listing.statusCode, listing.body).toBe(200);
    expect(listing.json()).toMatchObject({ listed: false, tables: [] });
    const unlisted = await get(`/api/providers/${talker.providerId}`);
    const missing = await get(`/api/providers/${randomUUID()}`);
    expect(unlisted.statusCode).toBe(404);
    expect(missing.statusCode).toBe(404);
    const withoutId = (body: string) => body.replace(/[0-9a-f-]{36}/g, "ID");
    expect(withoutId(unlisted.body)).toBe(withoutId(missing.body));
    const page = (await get("/api/providers")).json();
    expect(page.providers.map((p: { id: string }) => p.id)).not.toContain(talker.providerId);
  });

  it("refuses bad listings with a 400 that says what is wrong, and other keys with a 401", async () => {
    const cases: [Record<string, unknown>, RegExp][] = [
      [{ tags: Array.from({ length: 11 }, (_, i) => `t${i}`) }, /tags|maxItems|11/],
      [{ tags: ["Not A Tag!"] }, /tag/],
      [{ name: "x".repeat(101) }, /name/],
      [{ description: "bad\u0000text" }, /control characters/],
      [{ shownTables: ["no_such_table"] }, /unknown tables "no_such_table"/],
      [{ tableDescriptions: { ghosts: { description: "x" } } }, /unknown tables "ghosts"/],
      [{ shownTables: ["items; DROP TABLE items"] }, /not a table name/],
      [{ listed: "yes" }, /listed/],
      [{ tableDescriptions: { items: { columns: { ["c".repeat(64)]: "x" } } } }, /not a column name/],
    ];
    for (const [body, message] of cases) {
      const answer = await putListing(talker.providerId, talker.apiKey, body);
      expect(answer.statusCode, JSON.stringify(body)).toBe(400);
      expect(answer.json().error).toMatch(message);
    }
    const other = await putListing(talker.providerId, flights.apiKey, { listed: true });
    expect(other.statusCode).toBe(401);
  });

  it("reads the tables, columns, types and row estimates of the provider's database", async () => {
    const answer = await putListing(flights.providerId, flights.apiKey, {
      listed: true,
      name: "Air traffic",
      description: "Scheduled routes between airports.",
      tags: ["aviation", "Travel"],
      tableDescriptions: { flights: { description: "one row a route", columns: { origin: "IATA code" } } },
    });
    expect(answer.statusCode, answer.body).toBe(200);
    expect(answer.json()).toMatchObject({ listed: true, tags: ["aviation", "travel"], refreshError: null });
    const profile = await get(`/api/providers/${flights.providerId}`);
    expect(profile.statusCode, profile.body).toBe(200);
    const body = profile.json();
    expect(body).toMatchObject({ name: "Air traffic", tags: ["aviation", "travel"] });
    expect(body.prices.pricePer1000Rows).toBe("2.000000");
    expect(body.terms).toMatchObject({ readOnly: false, statementTimeoutMs: expect.any(Number) });
    expect(body.tables.map((t: { name: string }) => t.name)).toEqual(["flights", "items", "orders"]);
    const table = body.tables.find((t: { name: string }) => t.name === "flights");
    expect(table).toMatchObject({ kind: "table", approximateRows: 30, description: "one row a route" });
    expect(table.columns).toContainEqual({ name: "origin", type: "text", description: "IATA code" });
    expect(table.columns).toContainEqual({ name: "id", type: "integer", description: "" });
  });

  it("shows only the tables the provider names", async () => {
    const answer = await putListing(talker.providerId, talker.apiKey, {
      listed: true,
      name: "Talker",
      description: "Everything about flights, flights and more flights: flights data.",
      shownTables: ["public.items"],
      tags: ["retail"],
    });
    expect(answer.statusCode, answer.body).toBe(200);
    const profile = (await get(`/api/providers/${talker.providerId}`)).json();
    expect(profile.tables.map((t: { name: string }) => t.name)).toEqual(["items"]);
  });
});

describe("the public catalog", () => {
  it("ranks a table-name match before a description match", async () => {
    const page = await get("/api/providers?q=flights");
    expect(page.statusCode, page.body).toBe(200);
    const ids = page.json().providers.map((p: { id: string }) => p.id);
    expect(ids).toEqual([flights.providerId, talker.providerId]);
  });

  it("filters by tag and by price ceiling", async () => {
    const aviation = (await get("/api/providers?tag=aviation")).json();
    expect(aviation.providers.map((p: { id: string }) => p.id)).toEqual([flights.providerId]);
    const cheap = (await get("/api/providers?maxPricePer1000Rows=1.5")).json();
    expect(cheap.providers.map((p: { id: string }) => p.id)).toEqual([talker.providerId]);
    expect((await get("/api/providers?maxPricePer1000Rows=abc")).statusCode).toBe(400);
    expect((await get("/api/providers?limit=0")).statusCode).toBe(400);
    expect((await get("/api/providers?cursor=bm9wZQ")).statusCode).toBe(400);
  });

  it("pages with a cursor, each listed provider once", async () => {
    const more = [];
    for (let i = 0; i < 3; i++) {
      const extra = await provider(1);
      expect((await putListing(extra.providerId, extra.apiKey, { listed: true })).statusCode).toBe(200);
      more.push(extra.providerId);
    }
    for (const q of ["", "items"]) {
      const seen: string[] = [];
      let cursor: string | null = null;
      do {
        const url: string = `/api/providers?limit=2${q ? `&q=${q}` : ""}${cursor ? `&cursor=${cursor}` : ""}`;
        const page = (await get(url)).json();
        expect(page.providers.length).toBeLessThanOrEqual(2);
        seen.push(...page.providers.map((p: { id: string }) => p.id));
        cursor = page.nextCursor;
      } while (cursor);
      expect(new Set(seen).size).toBe(seen.length);
      expect(seen.sort()).toEqual([flights.providerId, talker.providerId, ...more].sort());
    }
  }, 60_000);

  it("contains no private field and no row value", async () => {
    const answers = [
      (await get("/api/providers")).body,
      (await get("/api/providers?q=items")).body,
      (await get(`/api/providers/${flights.providerId}`)).body,
      (await get(`/api/providers/${talker.providerId}`)).body,
    ];
    for (const who of [flights, talker]) {
      const url = new URL(who.db.url);
      const secrets = [
        SECRET_ROW_VALUE,
        who.apiKey,
        who.walletAddress,
        who.db.role,
        who.db.name,
        decodeURIComponent(url.password),
        `${url.hostname}:${url.port}`,
        "@example.com",
        "connection",
      ];
      for (const answer of answers)
        for (const secret of secrets) expect(answer.toLowerCase()).not.toContain(secret.toLowerCase());
    }
  });
});

describe("POST /api/providers/:id/quote", () => {
  it("costs what the same query is charged when it runs, and runs nothing", async () => {
    const sql = "SELECT id, origin FROM flights";
    const quote = await gateway.app.inject({
      method: "POST",
      url: `/api/providers/${flights.providerId}/quote`,
      payload: { sql },
    });
    expect(quote.statusCode, quote.body).toBe(200);
    expect(quote.json()).toMatchObject({ allowed: true, estimatedRows: 30, pricePer1000Rows: "2.000000" });
    const agent = randomWallet();
    await creditDeposit(gateway.ctx.db, {
      chainId: 8453,
      txHash: randomTxHash(),
      agentWallet: agent,
      providerId: flights.providerId,
      amountMicro: 1_000_000n,
      blockNumber: 1n,
    });
    const ran = await gateway.app.inject({
      method: "POST",
      url: "/api/query",
      payload: { sql, agentWallet: agent, providerId: flights.providerId },
    });
    expect(ran.statusCode, ran.body).toBe(200);
    expect(ran.json().actualCost).toBe(quote.json().estimatedCost);
  });

  it("says which rule refuses a statement, and does not run a write", async () => {
    const refused = await gateway.app.inject({
      method: "POST",
      url: `/api/providers/${flights.providerId}/quote`,
      payload: { sql: "DROP TABLE flights" },
    });
    expect(refused.statusCode).toBe(200);
    expect(refused.json()).toMatchObject({ allowed: false, refusal: { rule: expect.any(String) } });
    const write = await gateway.app.inject({
      method: "POST",
      url: `/api/providers/${flights.providerId}/quote`,
      payload: { sql: "DELETE FROM flights WHERE id > 0" },
    });
    expect(write.statusCode, write.body).toBe(200);
    expect(write.json()).toMatchObject({ allowed: true, estimatedRows: 30 });
    const counted = await runSql<{ n: number }>("SELECT count(*)::int AS n FROM flights", flights.db.url);
    expect(counted[0]?.n).toBe(30);
    const withParams = await gateway.app.inject({
      method: "POST",
      url: `/api/providers/${flights.providerId}/quote`,
      payload: { sql: "SELECT id FROM flights WHERE origin = $1", params: ["A"] },
    });
    expect(withParams.json()).toMatchObject({ allowed: true, estimatedRows: 30 });
    const twoWithParams = await gateway.app.inject({
      method: "POST",
      url: `/api/providers/${flights.providerId}/quote`,
      payload: { sql: "SELECT 1; SELECT 2", params: [1] },
    });
    expect(twoWithParams.statusCode).toBe(400);
    expect(twoWithParams.json().error).toMatch(/params/);
    const unknown = await gateway.app.inject({
      method: "POST",
      url: `/api/providers/${randomUUID()}/quote`,
      payload: { sql: "SELECT 1" },
    });
    expect(unknown.statusCode).toBe(404);
  });
});

describe("taking a listing off", () => {
  it("removes the provider from the catalog at once", async () => {
    const leaving = await provider(1);
    expect((await putListing(leaving.providerId, leaving.apiKey, { listed: true })).statusCode).toBe(200);
    expect((await get(`/api/providers/${leaving.providerId}`)).statusCode).toBe(200);
    expect((await putListing(leaving.providerId, leaving.apiKey, { listed: false })).statusCode).toBe(200);
    expect((await get(`/api/providers/${leaving.providerId}`)).statusCode).toBe(404);
    const all = (await get("/api/providers?limit=100")).json();
    expect(all.providers.map((p: { id: string }) => p.id)).not.toContain(leaving.providerId);
  });
});

describe("a provider whose database is down", () => {
  it("keeps its last listing and its date", async () => {
    const gone = await provider(1);
    expect(
      (await putListing(gone.providerId, gone.apiKey, { listed: true, name: "Gone soon" })).statusCode,
    ).toBe(200);
    const before = (await get(`/api/providers/${gone.providerId}`)).json();
    await gateway.ctx.upstream.closeAll();
    await gone.db.drop();
    databases.splice(databases.indexOf(gone.db), 1);
    await refreshListing({ db: gateway.ctx.db, upstream: gateway.ctx.upstream }, gone.providerId);
    const after = (await get(`/api/providers/${gone.providerId}`)).json();
    expect(after.refreshedAt).toBe(before.refreshedAt);
    expect(after.tables).toEqual(before.tables);
    const listing = await gateway.app.inject({
      method: "GET",
      url: `/api/providers/${gone.providerId}/listing`,
      headers: { "x-api-key": gone.apiKey },
    });
    expect(listing.json().refreshError).toMatch(/could not read/);
  });
});
