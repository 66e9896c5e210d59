import { decodePaymentRequiredHeader } from "@x402/core/http";
import { Ajv2020 } from "ajv/dist/2020.js";
import { generatePrivateKey } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { OwnedTestDatabase } from "../support/database.js";
import { randomWallet } from "../support/fixtures.js";
import {
  createProviderDatabase,
  registerPricedProvider,
  startTestGateway,
  type TestGateway,
} from "../support/gateway.js";

let gateway: TestGateway;
let db: OwnedTestDatabase;
let listed: { providerId: string; apiKey: string; walletAddress: string };
let unlisted: { providerId: string; apiKey: string; walletAddress: string };

beforeAll(async () => {
  gateway = await startTestGateway({
    env: {
      PGTOLL_CATALOG_REFRESH_INTERVAL_MS: "0",
      PGTOLL_X402_SETTLER_KEY: generatePrivateKey(),
      // 402s are answered without the chain: nothing is paid in these tests.
      PGTOLL_RPC_URL: "http://127.0.0.1:9",
      PGTOLL_TOKEN_ADDRESS: "0x036CbD53842c5426634e7929541eC2318f3dCF7e",
    },
  });
  db = await createProviderDatabase(20);
  listed = await registerPricedProvider(gateway, db.url);
  unlisted = await registerPricedProvider(gateway, db.url);
  const put = await gateway.app.inject({
    method: "PUT",
    url: `/api/providers/${listed.providerId}/listing`,
    headers: { "x-api-key": listed.apiKey },
    payload: {
      listed: true,
      name: "Shop data",
      description: "Items and orders of a shop.",
      tags: ["retail"],
    },
  });
  expect(put.statusCode, put.body).toBe(200);
}, 60_000);
afterAll(async () => {
  await gateway?.close();
  await db?.drop();
});

function unpaidQuery(providerId: string) {
  return gateway.app.inject({
    method: "POST",
    url: "/api/query",
    payload: { sql: "SELECT id FROM items", agentWallet: randomWallet(), providerId },
  });
}

/** Validates a bazaar declaration as a facilitator must: its info against its own JSON Schema (draft 2020-12). */
function validBazaar(bazaar: { info: unknown; schema: object }): boolean {
  return new Ajv2020({ strict: false }).validate(bazaar.schema, bazaar.info);
}

describe("x402 discovery", () => {
  it("a listed provider's 402 declares its query endpoint with the bazaar extension", async () => {
    const answer = await unpaidQuery(listed.providerId);
    expect(answer.statusCode, answer.body).toBe(402);
    const required = decodePaymentRequiredHeader(answer.headers["payment-required"] as string);
    expect(required.resource).toMatchObject({
      description: "Items and orders of a shop.",
      serviceName: "Shop data",
      tags: ["retail"],
    });
    const bazaar = required.extensions?.bazaar as {
      info: { input: { type: string; method: string; bodyType: string; body: Record<string, unknown> } };
      schema: { properties: { input: { properties: { body: { required: string[] } } } } };
    };
    expect(bazaar.info.input).toMatchObject({ type: "http", method: "POST", bodyType: "json" });
    expect(bazaar.info.input.body.providerId).toBe(listed.providerId);
    expect(bazaar.schema.properties.input.properties.body.required).toEqual(
      expect.arrayContaining(["sql", "providerId"]),
    );
    expect(validBazaar(bazaar as never)).toBe(true);
    // The body carries the same declaration.
    expect(answer.json().extensions.bazaar).toEqual(bazaar);
  });

  it("an unlisted provider's 402 declares nothing", async () => {
    const answer = await unpaidQuery(unlisted.providerId);
    expect(answer.statusCode).toBe(402);
    const required = decodePaymentRequiredHeader(answer.headers["payment-required"] as string);
    expect(required.extensions).toBeUndefined();
    expect(required.resource.serviceName).toBeUndefined();
  });

  it("GET /discovery/resources lists the listed providers' endpoints in the facilitator's shape", async () => {
    const answer = await gateway.app.inject({ method: "GET", url: "/discovery/resources" });
    expect(answer.statusCode, answer.body).toBe(200);
    const page = answer.json();
    expect(page).toMatchObject({ x402Version: 2, pagination: { total: 1, offset: 0 } });
    const [item] = page.items;
    expect(item).toMatchObject({
      type: "http",
      x402Version: 2,
      metadata: { providerId: listed.providerId, serviceName: "Shop data" },
    });
    expect(item.resource).toMatch(/\/api\/query$/);
    expect(item.accepts[0].payTo.toLowerCase()).toBe(listed.walletAddress.toLowerCase());
    expect(validBazaar(item.extensions.bazaar)).toBe(true);
    expect(JSON.stringify(page)).not.toContain(unlisted.providerId);
    const otherNetwork = await gateway.app.inject({
      method: "GET",
      url: "/discovery/resources?network=eip155:1",
    });
    expect(otherNetwork.json().items).toEqual([]);
    expect(
      (await gateway.app.inject({ method: "GET", url: "/discovery/resources?limit=x" })).statusCode,
    ).toBe(400);
  });
});
