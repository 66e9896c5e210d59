import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import type { Hex } from "viem";
import { generatePrivateKey, privateKeyToAddress } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { costOfRows, priceOf } from "../../src/billing/cost.js";
import { formatMicro } from "../../src/billing/money.js";
import { createAgentToken } from "../../src/proxy/agent-token.js";
import {
  createMetadataDatabase,
  type OwnedTestDatabase,
  runSql,
  type TestDatabase,
} from "../support/database.js";
import { createProviderDatabase } from "../support/gateway.js";
import { remoteMcpClient, upstreamSessionsOf } from "../support/mcp-clients.js";
import {
  creditAgent,
  type PgtollProcess,
  registerProviderOver,
  startPgtollProcess,
} from "../support/pgtoll-process.js";

/** 1 USDC per 1000 rows: a row costs 1000 micro-USDC. */
const PRICE = priceOf({ priceMicroPer1000Rows: 1_000_000n, markupPpm: 1_000_000n });
const IDLE_MS = 1000;

let meta: { db: TestDatabase; close(): Promise<void> };
let providerDb: OwnedTestDatabase;
let pgtoll: PgtollProcess;
let providerId: string;
let providerWallet: string;
const clients: Client[] = [];

beforeAll(async () => {
  meta = await createMetadataDatabase();
  providerDb = await createProviderDatabase(20);
  pgtoll = await startPgtollProcess(meta.db.url, {
    PGTOLL_TRUST_PROXY: "on",
    PGTOLL_MCP_SESSIONS_PER_IP: "2",
    PGTOLL_MCP_MAX_SESSIONS: "5",
    // Two of the five only for funded agents.
    PGTOLL_FUNDED_RESERVE_PERCENT: "40",
    PGTOLL_MCP_PROXY_IDLE_MS: String(IDLE_MS),
  });
  providerWallet = privateKeyToAddress(generatePrivateKey()).toLowerCase();
  providerId = await registerProviderOver(
    pgtoll.httpUrl,
    providerDb.url,
    { basePricePer1000Rows: 1, markupMultiplier: 1 },
    providerWallet,
  );
}, 120_000);
afterAll(async () => {
  for (const client of clients) await client.close().catch(() => {});
  await pgtoll?.stop();
  await providerDb?.drop();
  await meta?.close();
});

async function agent(funds: bigint): Promise<{ key: Hex; wallet: string }> {
  const key = generatePrivateKey();
  const wallet = privateKeyToAddress(key).toLowerCase();
  if (funds > 0n) await creditAgent(meta.db.url, wallet, providerId, funds);
  return { key, wallet };
}

/** An MCP session of `key` from `address` (as the load balancer reports it). */
async function session(key: Hex, address: string) {
  const opened = await remoteMcpClient(
    pgtoll.httpUrl,
    providerId,
    await createAgentToken(key, providerId),
    address,
  );
  clients.push(opened.client);
  return opened;
}

async function call(client: Client, name: string, args: Record<string, unknown> = {}) {
  return (await client.callTool({ name, arguments: args })) as CallToolResult;
}

const upstreamSessions = () => upstreamSessionsOf(providerDb.adminUrl, "pgtoll-mcp");

/** The status and JSON-RPC error of an `initialize` from `address`. */
async function initialize(
  key: Hex,
  address: string,
  { provider = providerId, accept = "application/json, text/event-stream" } = {},
) {
  const response = await fetch(`${pgtoll.httpUrl}/mcp?provider=${provider}`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      accept,
      authorization: `Bearer ${await createAgentToken(key, provider)}`,
      "x-forwarded-for": address,
    },
    body: JSON.stringify({
      jsonrpc: "2.0",
      id: 1,
      method: "initialize",
      params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "curl", version: "1" } },
    }),
  });
  const sessionId = response.headers.get("mcp-session-id");
  // An opened session answers with an event stream: only its headers matter here.
  const json = response.headers.get("content-type")?.includes("json");
  const body = json ? ((await response.json()) as { error?: { message: string } }) : {};
  if (!json) await response.body?.cancel();
  return { status: response.status, retryAfter: response.headers.get("retry-after"), body, sessionId };
}

async function end(key: Hex, sessionId: string | null) {
  await fetch(`${pgtoll.httpUrl}/mcp?provider=${providerId}`, {
    method: "DELETE",
    headers: {
      authorization: `Bearer ${await createAgentToken(key, providerId)}`,
      "mcp-session-id": sessionId ?? "",
      "mcp-protocol-version": "2025-06-18",
    },
  });
}

describe("remote MCP sessions and the provider's upstream sessions", () => {
  it("answers the free tools without an upstream session; a query opens one, given back when idle", async () => {
    const poor = await agent(0n);
    const rich = await agent(1_000_000n);
    const idle = await session(poor.key, "198.51.100.1");
    expect((await call(idle.client, "balance")).structuredContent).toEqual({
      balance: "0.000000",
      pricePer1000Rows: "1.000000",
      price: "1.000000",
      dailyLimit: null,
      spentToday: "0.000000",
      remainingToday: null,
      resetsAt: expect.stringMatching(/T00:00:00\.000Z$/),
      depositAddress: providerWallet,
    });
    expect((await call(idle.client, "transactions")).structuredContent).toEqual({ transactions: [] });
    const busy = await session(rich.key, "198.51.100.2");
    expect((await call(busy.client, "balance")).structuredContent).toMatchObject({ balance: "1.000000" });
    expect(await upstreamSessions()).toBe(0);

    const first = await call(busy.client, "query", { sql: "SELECT id FROM items WHERE id <= 3" });
    expect(first.structuredContent).toMatchObject({ rowCount: 3, balance: formatMicro(1_000_000n - 3000n) });
    expect(await upstreamSessions()).toBe(1);
    // The session's charges are in the balance while its proxy session is open.
    expect((await call(busy.client, "balance")).structuredContent).toMatchObject({
      balance: formatMicro(1_000_000n - costOfRows(3, PRICE)),
    });
    await expect.poll(upstreamSessions, { timeout: IDLE_MS + 5000, interval: 100 }).toBe(0);
    // Given back: its charges are written, and the next query opens a new one.
    expect((await call(busy.client, "balance")).structuredContent).toMatchObject({
      balance: formatMicro(1_000_000n - costOfRows(3, PRICE)),
    });
    const second = await call(busy.client, "query", { sql: "SELECT id FROM items WHERE id <= 2" });
    expect(second.structuredContent).toMatchObject({
      rowCount: 2,
      balance: formatMicro(1_000_000n - costOfRows(5, PRICE)),
    });

    // An agent that cannot pay a row gets no upstream session for a query, and is told how to fund.
    const refused = await call(idle.client, "query", { sql: "SELECT id FROM items", max_rows: 5 });
    expect(refused.isError).toBe(true);
    expect((refused.content[0] as { text: string }).text).toMatch(
      new RegExp(
        `insufficient funds: 0.000000 USDC available .* so 0.005000 USDC is missing. To top up, send USDC to the provider's wallet ${providerWallet}`,
      ),
    );
    await idle.end();
    await busy.end();
    await expect.poll(upstreamSessions, { timeout: 5000 }).toBe(0);
  }, 60_000);

  it("limits sessions per address (429) and in total (503), with a share only funded agents may take", async () => {
    const opened: [Hex, string | null][] = [];
    try {
      const one = await agent(0n);
      // An initialize the transport refuses (it does not accept an event stream) opens no session, and
      // keeps no place; an unknown provider is 404.
      for (let i = 0; i < 3; i++)
        expect((await initialize(one.key, "203.0.113.1", { accept: "application/json" })).status).toBe(406);
      expect(
        await initialize(one.key, "203.0.113.1", { provider: "00000000-0000-4000-8000-000000000000" }),
      ).toMatchObject({
        status: 404,
        body: { error: expect.stringMatching(/does not exist or has not set its pricing yet/) },
      });
      // Per address: two, however the address is spelled (a dual-stack balancer writes IPv4 clients mapped).
      for (const spelling of ["203.0.113.1", "::ffff:cb00:7101"]) {
        const answer = await initialize(one.key, spelling);
        expect(answer.status).toBe(200);
        opened.push([one.key, answer.sessionId]);
      }
      const third = await initialize(one.key, "0:0:0:0:0:ffff:203.0.113.1");
      expect(third).toMatchObject({
        status: 429,
        retryAfter: "60",
        body: {
          error: {
            message: "too many MCP sessions from this address: at most 2 (PGTOLL_MCP_SESSIONS_PER_IP)",
          },
        },
      });
      // Agents without funds: three of the five, whatever their address.
      const another = await agent(0n);
      const unfunded = await initialize(another.key, "203.0.113.2");
      opened.push([another.key, unfunded.sessionId]);
      expect((await initialize(another.key, "203.0.113.3")).body).toMatchObject({
        error: {
          message: expect.stringMatching(/the 3 MCP sessions open to agents without funds are in use/),
        },
      });
      // A funded agent takes the kept share, up to the total.
      const funded = await agent(1_000_000n);
      for (const address of ["198.51.100.7", "198.51.100.8"]) {
        const answer = await initialize(funded.key, address);
        expect(answer.status).toBe(200);
        opened.push([funded.key, answer.sessionId]);
      }
      expect(await initialize(funded.key, "198.51.100.9")).toMatchObject({
        status: 503,
        body: { error: { message: "too many MCP sessions: at most 5 (PGTOLL_MCP_MAX_SESSIONS)" } },
      });
      // A session ended gives its place back.
      const [key, id] = opened.pop()!;
      await end(key, id);
      expect((await initialize(funded.key, "198.51.100.9")).status).toBe(200);
    } finally {
      for (const [key, id] of opened) await end(key, id);
    }
  }, 60_000);

  it("start the provider's upstream sessions with its connection string's options", async () => {
    await runSql(
      "CREATE SCHEMA IF NOT EXISTS myschema; CREATE TABLE IF NOT EXISTS myschema.widgets (id int); INSERT INTO myschema.widgets VALUES (7)",
      providerDb.url,
    );
    const url = new URL(providerDb.url);
    url.searchParams.set("options", "-c search_path=myschema");
    const withSchema = await registerProviderOver(
      pgtoll.httpUrl,
      url.toString(),
      { basePricePer1000Rows: 1, markupMultiplier: 1 },
      privateKeyToAddress(generatePrivateKey()).toLowerCase(),
    );
    const key = generatePrivateKey();
    await creditAgent(meta.db.url, privateKeyToAddress(key).toLowerCase(), withSchema, 1_000_000n);
    const opened = await remoteMcpClient(
      pgtoll.httpUrl,
      withSchema,
      await createAgentToken(key, withSchema),
      "198.51.100.77",
    );
    clients.push(opened.client);
    const answer = await call(opened.client, "query", { sql: "SELECT id FROM widgets" });
    expect(answer.isError ?? false).toBe(false);
    expect(answer.structuredContent).toMatchObject({ rows: [{ id: 7 }] });
    await opened.end();
  });
});
