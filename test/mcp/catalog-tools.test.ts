import { randomBytes } from "node:crypto";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createMetadataDatabase, type OwnedTestDatabase, type TestDatabase } from "../support/database.js";
import { createProviderDatabase } from "../support/gateway.js";
import { remoteCatalogClient, stdioCatalogClient } from "../support/mcp-clients.js";
import { type PgtollProcess, startPgtollProcess } from "../support/pgtoll-process.js";

let meta: { db: TestDatabase; close(): Promise<void> };
let providerDb: OwnedTestDatabase;
let pgtoll: PgtollProcess;
let listedId: string;
let unlistedId: string;
const clients: Client[] = [];

async function send(url: string, method: string, body: unknown, headers: Record<string, string> = {}) {
  const response = await fetch(url, {
    method,
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify(body),
  });
  const answer = (await response.json()) as Record<string, unknown>;
  if (!response.ok) throw new Error(`${method} ${url}: ${response.status} ${JSON.stringify(answer)}`);
  return answer;
}

async function register(listing?: Record<string, unknown>): Promise<string> {
  const { provider, apiKey } = (await send(`${pgtoll.httpUrl}/api/providers/register`, "POST", {
    name: "Test data",
    email: `${randomBytes(6).toString("hex")}@example.com`,
    walletAddress: `0x${randomBytes(20).toString("hex")}`,
    connectionString: providerDb.url,
  })) as { provider: { id: string }; apiKey: string };
  const key = { "x-api-key": apiKey };
  await send(
    `${pgtoll.httpUrl}/api/providers/${provider.id}/pricing`,
    "POST",
    {
      basePricePer1000Rows: 0.5,
      markupMultiplier: 1,
    },
    key,
  );
  if (listing) await send(`${pgtoll.httpUrl}/api/providers/${provider.id}/listing`, "PUT", listing, key);
  return provider.id;
}

beforeAll(async () => {
  meta = await createMetadataDatabase();
  providerDb = await createProviderDatabase(20);
  pgtoll = await startPgtollProcess(meta.db.url);
  listedId = await register({
    listed: true,
    name: "Shop",
    description: "A small shop's items and orders.",
    tags: ["retail"],
    tableDescriptions: { items: { description: "what is sold" } },
  });
  unlistedId = await register();
}, 120_000);
afterAll(async () => {
  for (const client of clients) await client.close().catch(() => {});
  await pgtoll?.stop();
  await providerDb?.drop();
  await meta?.close();
});

function structured(result: CallToolResult) {
  expect(result.isError, JSON.stringify(result.content)).toBeFalsy();
  return result.structuredContent as Record<string, unknown>;
}

describe.each([
  ["remote (POST /mcp without a provider)", () => remoteCatalogClient(pgtoll.httpUrl)],
  ["stdio (pgtoll mcp without --provider)", () => stdioCatalogClient(pgtoll.httpUrl)],
])("the catalog tools over %s", (_transport, connect) => {
  let client: Client;
  beforeAll(async () => {
    client = await connect();
    clients.push(client);
  }, 60_000);

  it("are served without a token, and say they cost nothing", async () => {
    const { tools } = await client.listTools();
    expect(tools.map((tool) => tool.name).sort()).toEqual(["describe_provider", "search_providers"]);
    for (const tool of tools) expect(tool.description).toMatch(/Free \(costs nothing/);
  });

  it("search_providers finds the listed provider by its table names, not the unlisted one", async () => {
    const found = structured(
      (await client.callTool({ name: "search_providers", arguments: { query: "orders" } })) as CallToolResult,
    );
    const providers = found.providers as { id: string; name: string; prices: { pricePer1000Rows: string } }[];
    expect(providers.map((p) => p.id)).toEqual([listedId]);
    expect(providers[0]).toMatchObject({ name: "Shop", prices: { pricePer1000Rows: "0.500000" } });
    const all = structured(
      (await client.callTool({ name: "search_providers", arguments: {} })) as CallToolResult,
    );
    expect((all.providers as { id: string }[]).map((p) => p.id)).not.toContain(unlistedId);
  });

  it("describe_provider reads a profile, and refuses an unlisted provider as an unknown one", async () => {
    const described = structured(
      (await client.callTool({
        name: "describe_provider",
        arguments: { provider_id: listedId },
      })) as CallToolResult,
    );
    const tables = (described.provider as { tables: { name: string; description: string }[] }).tables;
    expect(tables.map((t) => t.name)).toEqual(["items", "orders"]);
    expect(tables[0]!.description).toBe("what is sold");
    const unlisted = (await client.callTool({
      name: "describe_provider",
      arguments: { provider_id: unlistedId },
    })) as CallToolResult;
    expect(unlisted.isError).toBe(true);
    expect(JSON.stringify(unlisted.content)).toContain("not in the catalog");
  });
});

it("a provider's paid tools still need the agent's token", async () => {
  const response = await fetch(`${pgtoll.httpUrl}/mcp?provider=${listedId}`, {
    method: "POST",
    headers: { "content-type": "application/json", accept: "application/json, text/event-stream" },
    body: JSON.stringify({
      jsonrpc: "2.0",
      id: 1,
      method: "initialize",
      params: { protocolVersion: "2025-03-26", capabilities: {}, clientInfo: { name: "x", version: "1" } },
    }),
  });
  expect(response.status).toBe(401);
});
