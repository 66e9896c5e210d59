import { randomBytes } from "node:crypto";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { TestDatabase } from "../support/database.js";
import {
  createProviderDatabase,
  registerPricedProvider,
  startTestGateway,
  type TestGateway,
} from "../support/gateway.js";

let gateway: TestGateway;
let providerDb: TestDatabase;

beforeAll(async () => {
  gateway = await startTestGateway();
  providerDb = await createProviderDatabase();
});
afterAll(async () => {
  await gateway?.close();
  await providerDb?.drop();
});

const wallet = () => `0x${randomBytes(20).toString("hex")}`;
const email = () => `${randomBytes(5).toString("hex")}@Example.com`;

function register(payload: Record<string, unknown>) {
  return gateway.app.inject({ method: "POST", url: "/api/providers/register", payload });
}

describe("POST /api/providers/register", () => {
  it("registers a provider, returns the record and a key once, and stores the connection string sealed", async () => {
    const walletAddress = wallet();
    const res = await register({
      name: " Acme data ",
      email: email(),
      walletAddress,
      connectionString: providerDb.url,
    });
    expect(res.statusCode).toBe(201);
    const body = res.json();
    expect(Object.keys(body).sort()).toEqual(["apiKey", "provider"]);
    expect(Object.keys(body.provider).sort()).toEqual([
      "createdAt",
      "email",
      "id",
      "name",
      "provisionedByGateway",
      "walletAddress",
    ]);
    expect(body.provider).toMatchObject({ name: "Acme data", provisionedByGateway: false });
    expect(body.provider.walletAddress.toLowerCase()).toBe(walletAddress);
    expect(body.provider.id).toMatch(/^[0-9a-f-]{36}$/);
    expect(new Date(body.provider.createdAt).toISOString()).toBe(body.provider.createdAt);
    expect(body.apiKey).toMatch(/^pgt_[A-Za-z0-9_-]{43}$/);
    expect(res.body).not.toContain(providerDb.url);

    const meta = new pg.Client({ connectionString: gateway.metaUrl });
    await meta.connect();
    const { rows } = await meta.query("SELECT connection_secret, api_key_hash FROM providers WHERE id = $1", [
      body.provider.id,
    ]);
    await meta.end();
    expect(rows[0].connection_secret).toMatch(/^v1:/);
    expect(rows[0].connection_secret).not.toContain("127.0.0.1");
    expect(rows[0].api_key_hash.toString("utf8")).not.toContain(body.apiKey);
    expect(gateway.ctx.box.open(rows[0].connection_secret)).toBe(providerDb.url);
  });

  it.each([
    [{ name: "", email: "a@b.co", walletAddress: `0x${"a".repeat(40)}` }, /name/],
    [{ name: "   ", email: "a@b.co", walletAddress: `0x${"a".repeat(40)}` }, /name/],
    [{ name: "x", email: "not-an-email", walletAddress: `0x${"a".repeat(40)}` }, /email/],
    [{ name: "x", email: "a@b.co", walletAddress: "a".repeat(40) }, /walletAddress/],
    [{ name: "x", email: "a@b.co", walletAddress: `0x${"g".repeat(40)}` }, /walletAddress/],
    [{ name: "x", email: "a@b.co", walletAddress: `0xAbCdEf${"a".repeat(34)}` }, /walletAddress.*checksum/],
    [{ email: "a@b.co", walletAddress: `0x${"a".repeat(40)}` }, /name/],
    [{ name: 5, email: "a@b.co", walletAddress: `0x${"a".repeat(40)}` }, /name/],
  ])("rejects %j with 400", async (fields, message) => {
    const res = await register({ connectionString: providerDb.url, ...fields });
    expect(res.statusCode).toBe(400);
    expect(res.json().error).toMatch(message);
  });

  it.each([
    ["mysql://u:p@127.0.0.1/db", /postgres:\/\//],
    ["not a url", /PostgreSQL URL/],
    ["postgres://nobody:secretpw@127.0.0.1:1/nothing", /could not connect.*127\.0\.0\.1:1/],
  ])("rejects the connection string %s with the reason", async (connectionString, message) => {
    const res = await register({ name: "x", email: email(), walletAddress: wallet(), connectionString });
    expect(res.statusCode).toBe(400);
    expect(res.json().error).toMatch(message);
    expect(res.json().error).not.toContain("secretpw");
  });

  it("names the database error when the credentials are wrong, without the password", async () => {
    const url = new URL(providerDb.url);
    url.password = "wrong-password-123";
    const res = await register({
      name: "x",
      email: email(),
      walletAddress: wallet(),
      connectionString: url.toString(),
    });
    expect(res.statusCode).toBe(400);
    expect(res.json().error).toMatch(/password authentication failed/);
    expect(res.json().error).not.toContain("wrong-password-123");
  });

  it("answers 409 for an email or wallet already registered, case-insensitively", async () => {
    const first = { name: "x", email: email(), walletAddress: wallet(), connectionString: providerDb.url };
    expect((await register(first)).statusCode).toBe(201);
    const sameEmail = await register({ ...first, email: first.email.toUpperCase(), walletAddress: wallet() });
    expect(sameEmail.statusCode).toBe(409);
    expect(sameEmail.json().error).toMatch(/email/);
    const sameWallet = await register({
      ...first,
      email: email(),
      walletAddress: first.walletAddress.toUpperCase().replace("0X", "0x"),
    });
    expect(sameWallet.statusCode).toBe(409);
    expect(sameWallet.json().error).toMatch(/walletAddress/);
  });
});

describe("POST /api/providers/:id/pricing", () => {
  it("sets and updates pricing with the provider's own key", async () => {
    const { providerId, apiKey } = await registerPricedProvider(gateway, providerDb.url, {
      basePricePer1000Rows: 0.5,
      markupMultiplier: 1.2,
    });
    const res = await gateway.app.inject({
      method: "POST",
      url: `/api/providers/${providerId}/pricing`,
      headers: { "x-api-key": apiKey },
      payload: { basePricePer1000Rows: 2.123456, markupMultiplier: 1.5 },
    });
    expect(res.statusCode).toBe(200);
    const pricing = res.json();
    expect(Object.keys(pricing).sort()).toEqual([
      "allowRowFolding",
      "basePricePer1000Rows",
      "createdAt",
      "id",
      "idleInTransactionTimeoutMs",
      "lockTimeoutMs",
      "markupMultiplier",
      "maxRowsWrittenPerStatement",
      "minimumCostPerStatement",
      "pricePerMB",
      "pricePerSecond",
      "providerId",
      "readOnly",
      "tablePrices",
      "updatedAt",
    ]);
    expect(pricing).toMatchObject({
      providerId,
      basePricePer1000Rows: 2.123456,
      markupMultiplier: 1.5,
      readOnly: false,
      allowRowFolding: false,
      maxRowsWrittenPerStatement: 1000,
      lockTimeoutMs: 5000,
      idleInTransactionTimeoutMs: 30_000,
      minimumCostPerStatement: 0,
      pricePerMB: 0,
      pricePerSecond: 0,
      tablePrices: {},
    });
    expect(new Date(pricing.updatedAt) >= new Date(pricing.createdAt)).toBe(true);
  });

  it("prices beyond rows: sets, keeps when omitted, removes with 0 and {}, and reads back without a key", async () => {
    const { providerId, apiKey } = await registerPricedProvider(gateway, providerDb.url);
    const post = (payload: Record<string, unknown>) =>
      gateway.app.inject({
        method: "POST",
        url: `/api/providers/${providerId}/pricing`,
        headers: { "x-api-key": apiKey },
        payload: { basePricePer1000Rows: 1, markupMultiplier: 1, ...payload },
      });
    const dimensions = {
      minimumCostPerStatement: 0.0001,
      pricePerMB: 0.01,
      pricePerSecond: 0.002,
      tablePrices: { Airports: 0.5, "public.routes": 2, '"Mixed Case"': 3 },
    };
    const set = await post(dimensions);
    expect(set.statusCode, set.body).toBe(200);
    const expected = {
      ...dimensions,
      tablePrices: { airports: 0.5, "public.routes": 2, "Mixed Case": 3 },
    };
    expect(set.json()).toMatchObject(expected);
    expect((await post({ markupMultiplier: 2 })).json()).toMatchObject({ ...expected, markupMultiplier: 2 });
    const read = await gateway.app.inject({ method: "GET", url: `/api/providers/${providerId}/pricing` });
    expect(read.statusCode).toBe(200);
    expect(read.json()).toMatchObject(expected);
    expect((await post({ pricePerMB: 0, tablePrices: {} })).json()).toMatchObject({
      ...expected,
      pricePerMB: 0,
      tablePrices: {},
    });
  });

  it.each([
    [{ minimumCostPerStatement: -0.01 }, "minimumCostPerStatement must be between 0 and 1000"],
    [{ minimumCostPerStatement: "0.1" }, "minimumCostPerStatement must be a finite number"],
    [{ pricePerMB: 1e-7 }, "pricePerMB must have at most 6 decimals"],
    [{ pricePerMB: 1e300 }, "pricePerMB must be between 0 and 1000000"],
    [{ pricePerSecond: null }, "pricePerSecond must be a finite number"],
    [{ tablePrices: [] }, "tablePrices must be an object"],
    [
      { tablePrices: { "airports; DROP TABLE x": 1 } },
      'tablePrices: "airports; DROP TABLE x" is not a table name',
    ],
    [{ tablePrices: { "a.b.c": 1 } }, 'tablePrices: "a.b.c" is not a table name'],
    [{ tablePrices: { airports: -1 } }, 'tablePrices["airports"] must be between 0 and 1000000'],
    [{ tablePrices: { airports: 1, AIRPORTS: 2 } }, 'tablePrices names "airports" twice'],
  ])("answers 400 naming the field for %j, and stores nothing", async (payload, message) => {
    const { providerId, apiKey } = await registerPricedProvider(gateway, providerDb.url);
    const res = await gateway.app.inject({
      method: "POST",
      url: `/api/providers/${providerId}/pricing`,
      headers: { "x-api-key": apiKey },
      payload: { basePricePer1000Rows: 7, markupMultiplier: 1, ...payload },
    });
    expect(res.statusCode).toBe(400);
    expect(res.json().error).toContain(`invalid pricing: ${message}`);
    const stored = await gateway.app.inject({ method: "GET", url: `/api/providers/${providerId}/pricing` });
    expect(stored.json()).toMatchObject({ basePricePer1000Rows: 1, pricePerMB: 0, tablePrices: {} });
  });

  it("GET answers 404 for a provider without pricing or unknown", async () => {
    const res = await gateway.app.inject({
      method: "GET",
      url: "/api/providers/00000000-0000-4000-8000-000000000000/pricing",
    });
    expect(res.statusCode).toBe(404);
  });

  it("sets the limits of agents' sessions, keeps them when omitted, and names a wrong one", async () => {
    const { providerId, apiKey } = await registerPricedProvider(gateway, providerDb.url);
    const post = (payload: Record<string, unknown>) =>
      gateway.app.inject({
        method: "POST",
        url: `/api/providers/${providerId}/pricing`,
        headers: { "x-api-key": apiKey },
        payload: { basePricePer1000Rows: 1, markupMultiplier: 1, ...payload },
      });
    const limits = { maxRowsWrittenPerStatement: 5, lockTimeoutMs: 100, idleInTransactionTimeoutMs: 2000 };
    expect((await post(limits)).json()).toMatchObject(limits);
    expect((await post({ basePricePer1000Rows: 3 })).json()).toMatchObject({
      basePricePer1000Rows: 3,
      ...limits,
    });
    for (const [field, value] of [
      ["maxRowsWrittenPerStatement", 0],
      ["maxRowsWrittenPerStatement", 2.5],
      ["lockTimeoutMs", "5000"],
      ["idleInTransactionTimeoutMs", 999],
      ["idleInTransactionTimeoutMs", 3_600_001],
    ] as const) {
      const res = await post({ [field]: value });
      expect(res.statusCode, `${field}: ${value}`).toBe(400);
      expect(res.json().error).toMatch(
        new RegExp(`^invalid pricing: ${field} must be an integer from \\d+ to \\d+$`),
      );
    }
  });

  it("answers 401 without a key, with a wrong key, and with another provider's key", async () => {
    const a = await registerPricedProvider(gateway, providerDb.url);
    const b = await registerPricedProvider(gateway, providerDb.url);
    const payload = { basePricePer1000Rows: 1, markupMultiplier: 1 };
    const url = `/api/providers/${a.providerId}/pricing`;
    for (const headers of [
      {},
      { "x-api-key": "pgt_wrong" },
      { "x-api-key": b.apiKey },
      { "x-api-key": "" },
    ]) {
      const res = await gateway.app.inject({ method: "POST", url, headers, payload });
      expect(res.statusCode).toBe(401);
      expect(res.json().error).toMatch(/API key/);
    }
  });

  it("answers 404 for an unknown provider and 400 for a malformed id", async () => {
    const payload = { basePricePer1000Rows: 1, markupMultiplier: 1 };
    const unknown = await gateway.app.inject({
      method: "POST",
      url: "/api/providers/00000000-0000-4000-8000-000000000000/pricing",
      headers: { "x-api-key": "pgt_x" },
      payload,
    });
    expect(unknown.statusCode).toBe(404);
    const malformed = await gateway.app.inject({
      method: "POST",
      url: "/api/providers/xyz/pricing",
      headers: { "x-api-key": "pgt_x" },
      payload,
    });
    expect(malformed.statusCode).toBe(400);
  });

  it.each([
    [{ basePricePer1000Rows: -1, markupMultiplier: 1 }],
    [{ basePricePer1000Rows: 1e-7, markupMultiplier: 1 }],
    [{ basePricePer1000Rows: 2_000_000, markupMultiplier: 1 }],
    [{ basePricePer1000Rows: 1, markupMultiplier: 0 }],
    [{ basePricePer1000Rows: 1, markupMultiplier: 1000 }],
    [{ basePricePer1000Rows: "1", markupMultiplier: 1 }],
    [{ basePricePer1000Rows: 1 }],
  ])("answers 400 for pricing %j", async (payload) => {
    const { providerId, apiKey } = await registerPricedProvider(gateway, providerDb.url);
    const res = await gateway.app.inject({
      method: "POST",
      url: `/api/providers/${providerId}/pricing`,
      headers: { "x-api-key": apiKey },
      payload,
    });
    expect(res.statusCode).toBe(400);
    expect(res.json().error).toMatch(/basePricePer1000Rows|markupMultiplier/);
  });
});
