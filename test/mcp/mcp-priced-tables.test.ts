import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import pg from "pg";
import { generatePrivateKey, privateKeyToAddress } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createAgentToken } from "../../src/proxy/agent-token.js";
import { createMetadataDatabase, type OwnedTestDatabase, type TestDatabase } from "../support/database.js";
import { createProviderDatabase } from "../support/gateway.js";
import { remoteMcpClient } from "../support/mcp-clients.js";
import {
  creditAgent,
  type PgtollProcess,
  registerProviderOver,
  startPgtollProcess,
} from "../support/pgtoll-process.js";

/** secret_prices at 1 USDC a row. */
const PRICING = { basePricePer1000Rows: 0.001, markupMultiplier: 1, tablePrices: { secret_prices: 1000 } };

let meta: { db: TestDatabase; close(): Promise<void> };
let providerDb: OwnedTestDatabase;
let pgtoll: PgtollProcess;
let providerId: string;
const ends: (() => Promise<void>)[] = [];

beforeAll(async () => {
  meta = await createMetadataDatabase();
  providerDb = await createProviderDatabase(20);
  const owner = new pg.Client({ connectionString: providerDb.url });
  await owner.connect();
  await owner.query(`CREATE TABLE secret_prices (id int PRIMARY KEY, secret text NOT NULL);
    INSERT INTO secret_prices SELECT g, 's3cr3t-' || g || '-value' FROM generate_series(1, 400) g;
    ANALYZE secret_prices`);
  await owner.end();
  pgtoll = await startPgtollProcess(meta.db.url, {});
  providerId = await registerProviderOver(pgtoll.httpUrl, providerDb.url, PRICING);
}, 120_000);
afterAll(async () => {
  for (const end of ends) await end().catch(() => {});
  await pgtoll?.stop();
  await providerDb?.drop();
  await meta?.close();
});

async function agentClient() {
  const key = generatePrivateKey();
  const wallet = privateKeyToAddress(key).toLowerCase();
  await creditAgent(meta.db.url, wallet, providerId, 100_000_000n);
  const opened = await remoteMcpClient(pgtoll.httpUrl, providerId, await createAgentToken(key, providerId));
  ends.push(opened.end);
  return opened.client;
}

async function queryTool(sql: string): Promise<{ isError: boolean; text: string }> {
  const client = await agentClient();
  const result = (await client.callTool({ name: "query", arguments: { sql } })) as CallToolResult;
  const text = result.content.map((part) => (part.type === "text" ? part.text : "")).join("");
  return { isError: result.isError === true, text };
}

describe("MCP's query tool: a priced table's values leave only at its price", () => {
  it("withholds the database's text of a statement that reads a priced table, keeping its SQLSTATE", async () => {
    const answer = await queryTool("SELECT (id || '=' || secret)::int FROM secret_prices WHERE id = 3");
    expect(answer.isError).toBe(true);
    expect(answer.text).toMatch(/SQLSTATE 22P02/);
    expect(answer.text).toMatch(/withheld because the statement reads a priced table/);
    expect(answer.text).not.toMatch(/s3cr3t/);
  });

  it.each([
    ["SELECT string_agg(secret, ',') FROM secret_prices", "priced-table-folding"],
    ["SELECT ARRAY(SELECT secret FROM secret_prices)", "priced-table-folding"],
    [
      "SELECT (SELECT secret FROM secret_prices WHERE id = 1), (SELECT secret FROM secret_prices WHERE id = 2)",
      "priced-table-folding",
    ],
    ["SELECT most_common_vals::text FROM pg_stats WHERE tablename = 'secret_prices'", "column-statistics"],
  ])("refuses %s (rule %s)", async (sql, rule) => {
    const answer = await queryTool(sql);
    expect(answer.isError).toBe(true);
    expect(answer.text).toMatch(new RegExp(`refused by the provider's policy, rule "${rule}"`));
    expect(answer.text).not.toMatch(/s3cr3t/);
  });

  it("runs folding over an unpriced table", async () => {
    const answer = await queryTool("SELECT string_agg(name, ',') AS names FROM items");
    expect(answer.isError, answer.text).toBe(false);
    expect(answer.text).toMatch(/item 1,/);
  });
});
