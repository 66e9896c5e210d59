import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import pg from "pg";
import type { Hex } from "viem";
import { generatePrivateKey, privateKeyToAddress } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { costOfRows, priceOf } from "../../src/billing/cost.js";
import { formatMicro } from "../../src/billing/money.js";
import {
  deployTestToken,
  type LocalChain,
  mintTokens,
  startLocalChain,
  type TestToken,
  tokenBalance,
} from "../../src/devchain/index.js";
import { createAgentToken } from "../../src/proxy/agent-token.js";
import { createMetadataDatabase, type OwnedTestDatabase, type TestDatabase } from "../support/database.js";
import { createProviderDatabase } from "../support/gateway.js";
import { stdioMcpClient } from "../support/mcp-clients.js";
import {
  creditAgent,
  ledgerStateOf,
  type PgtollProcess,
  registerProviderOver,
  startPgtollProcess,
} from "../support/pgtoll-process.js";

/** 1 USDC per 1000 rows with a markup of 1.5: a row costs 1500 micro-USDC. */
const PRICE = priceOf({ priceMicroPer1000Rows: 1_000_000n, markupPpm: 1_500_000n });
const FUNDED = 50_000_000n;

let chain: LocalChain;
let token: TestToken;
let meta: { db: TestDatabase; close(): Promise<void> };
let providerDb: OwnedTestDatabase;
let pgtoll: PgtollProcess;
let providerId: string;
let providerWallet: Hex;
let agentKey: Hex;
let wallet: string;
const clients: Client[] = [];

beforeAll(async () => {
  chain = await startLocalChain();
  const [deployer, agentAccount, providerAccount] = chain.accounts;
  token = await deployTestToken(chain, deployer!.privateKey);
  agentKey = agentAccount!.privateKey;
  wallet = agentAccount!.address.toLowerCase();
  providerWallet = providerAccount!.address;
  await mintTokens(chain, deployer!.privateKey, token, agentAccount!.address, 100_000_000n);
  meta = await createMetadataDatabase();
  providerDb = await createProviderDatabase(300);
  pgtoll = await startPgtollProcess(meta.db.url, {
    PGTOLL_RPC_URL: chain.rpcUrl,
    PGTOLL_CHAIN_ID: "8453",
    PGTOLL_TOKEN_ADDRESS: token.address,
    PGTOLL_MIN_CONFIRMATIONS: "1",
  });
  providerId = await registerProviderOver(
    pgtoll.httpUrl,
    providerDb.url,
    { basePricePer1000Rows: 1, markupMultiplier: 1.5 },
    providerWallet,
  );
  await creditAgent(meta.db.url, wallet, providerId, FUNDED);
}, 180_000);
afterAll(async () => {
  for (const client of clients) await client.close().catch(() => {});
  await pgtoll?.stop();
  await providerDb?.drop();
  await meta?.close();
  await chain?.stop();
});

/** The stdio server as an agent host runs it, with the SDK's own client. */
async function stdioClient(env: Record<string, string> = {}, key: Hex = agentKey): Promise<Client> {
  const client = await stdioMcpClient(pgtoll, providerId, key, env);
  clients.push(client);
  return client;
}

async function remoteClient(bearer: string): Promise<Client> {
  const transport = new StreamableHTTPClientTransport(
    new URL(`${pgtoll.httpUrl}/mcp?provider=${providerId}`),
    {
      requestInit: { headers: { Authorization: `Bearer ${bearer}` } },
    },
  );
  const client = new Client({ name: "pgtoll-test-remote", version: "1" });
  await client.connect(transport);
  clients.push(client);
  return client;
}

async function call(client: Client, name: string, args: Record<string, unknown> = {}) {
  const result = (await client.callTool({ name, arguments: args })) as CallToolResult;
  return result;
}

function text(result: CallToolResult): string {
  return result.content.map((part) => (part.type === "text" ? part.text : "")).join("");
}

async function ledgerBalance(of = wallet): Promise<bigint> {
  const state = await ledgerStateOf(meta.db.url, of, providerId);
  // The ledger's invariants hold at every step: balance = sum of entries, an unbroken chain.
  expect(state).toMatchObject({ chained: true, entriesSumMicro: state.balanceMicro });
  return state.balanceMicro;
}

describe("the pgtoll MCP server", () => {
  for (const surface of ["stdio", "Streamable HTTP"] as const) {
    it(`over ${surface}: lists the tools, runs them, and charges exactly by the cost rule`, async () => {
      const client =
        surface === "stdio"
          ? await stdioClient()
          : await remoteClient(await createAgentToken(agentKey, providerId));
      const { tools } = await client.listTools();
      const names = tools.map((tool) => tool.name).sort();
      expect(names).toEqual([
        "balance",
        "describe_table",
        "estimate",
        "list_tables",
        "query",
        "transactions",
      ]);
      expect(tools.find((tool) => tool.name === "list_tables")?.annotations?.readOnlyHint).toBe(true);
      expect(tools.find((tool) => tool.name === "query")?.inputSchema.properties).toHaveProperty("max_rows");

      const before = await ledgerBalance();
      const query = await call(client, "query", {
        sql: "SELECT id, name FROM items WHERE id <= $1 ORDER BY id",
        params: [5],
      });
      expect(query.isError).toBeFalsy();
      const rows = query.structuredContent as {
        rows: { id: number }[];
        rowCount: number;
        cost: string;
        balance: string;
      };
      expect(rows.rows.map((row) => row.id)).toEqual([1, 2, 3, 4, 5]);
      expect(rows.rowCount).toBe(5);
      expect(rows.cost).toBe(formatMicro(costOfRows(5, PRICE)));
      expect(rows.balance).toBe(formatMicro(before - costOfRows(5, PRICE)));
      expect(await ledgerBalance()).toBe(before - costOfRows(5, PRICE));

      // Capped at max_rows: only the rows returned are charged.
      const capped = (await call(client, "query", { sql: "SELECT id FROM items", max_rows: 3 }))
        .structuredContent as { rows: unknown[]; truncated: boolean; command: string; cost: string };
      expect(capped.rows).toHaveLength(3);
      expect(capped.truncated).toBe(true);
      // Cut before its CommandComplete, the answer still names the command that ran.
      expect(capped.command).toBe("SELECT");
      expect(capped.cost).toBe(formatMicro(costOfRows(3, PRICE)));
      const defaultCap = (await call(client, "query", { sql: "SELECT id FROM items" })).structuredContent as {
        rows: unknown[];
        truncated: boolean;
      };
      expect(defaultCap).toMatchObject({ truncated: true });
      expect(defaultCap.rows).toHaveLength(100);

      const estimate = (await call(client, "estimate", { sql: "SELECT * FROM items" })).structuredContent as {
        estimatedRows: number;
        estimatedCost: string;
        cost: string;
      };
      expect(estimate.estimatedRows).toBeGreaterThan(0);
      expect(estimate.estimatedCost).toBe(formatMicro(costOfRows(estimate.estimatedRows, PRICE)));
      expect(estimate.cost).toBe(formatMicro(costOfRows(1, PRICE)));

      const listed = (await call(client, "list_tables")).structuredContent as {
        tables: (Record<string, unknown> & { name: string; columns: { name: string; type: string }[] })[];
        cost: string;
      };
      expect(listed.tables.map((table) => table.name)).toEqual(["items", "orders"]);
      // One case style for the answer's field names: camelCase, as everywhere else in the answers.
      expect(Object.keys(listed.tables[0]!).sort()).toEqual([
        "columns",
        "comment",
        "kind",
        "name",
        "rowEstimate",
        "schema",
      ]);
      expect(listed.tables[0]?.columns).toContainEqual({
        name: "created_at",
        type: "timestamp with time zone",
      });
      expect(listed.cost).toBe(formatMicro(costOfRows(2, PRICE)));

      const described = (await call(client, "describe_table", { table: "items" })).structuredContent as {
        table: Record<string, unknown> & {
          columns: { name: string; nullable: boolean }[];
          constraints: { type: string }[];
          indexes: { primary: boolean }[];
        };
        cost: string;
      };
      expect(described.table.columns.map((column) => column.name)).toEqual(["id", "name", "created_at"]);
      expect(described.table).toHaveProperty("rowEstimate");
      expect(described.table).not.toHaveProperty("row_estimate");
      expect(described.table.constraints.map((constraint) => constraint.type)).toContain("primary key");
      expect(described.table.indexes.some((index) => index.primary)).toBe(true);
      expect(described.cost).toBe(formatMicro(costOfRows(1, PRICE)));
      const missing = await call(client, "describe_table", { table: "nowhere" });
      expect(missing.isError).toBe(true);

      const spent =
        costOfRows(5, PRICE) +
        costOfRows(3, PRICE) +
        costOfRows(100, PRICE) +
        2n * costOfRows(1, PRICE) +
        costOfRows(2, PRICE);
      const balance = (await call(client, "balance")).structuredContent as {
        balance: string;
        depositAddress: string;
      };
      expect(balance.balance).toBe(formatMicro(before - spent));
      expect(balance.depositAddress.toLowerCase()).toBe(providerWallet.toLowerCase());
      expect(await ledgerBalance()).toBe(before - spent);

      const ledger = (await call(client, "transactions", { limit: 5 })).structuredContent as {
        transactions: { type: string; metadata: { statements?: number } }[];
      };
      expect(ledger.transactions[0]?.type).toBe("query");

      const resources = await client.listResources();
      expect(resources.resources.map((resource) => resource.uri)).toEqual([`pgtoll://${providerId}/schema`]);
      const schema = await client.readResource({ uri: `pgtoll://${providerId}/schema` });
      const content = schema.contents[0] as { text: string };
      expect((JSON.parse(content.text) as { tables: { name: string }[] }).tables.map((t) => t.name)).toEqual([
        "items",
        "orders",
      ]);
    }, 60_000);
  }

  it("refused SQL is a tool error naming the rule, uncharged; the database's errors are bounded and charged a row", async () => {
    const client = await stdioClient();
    const before = await ledgerBalance();
    const refused = await call(client, "query", { sql: "DROP TABLE items" });
    expect(refused.isError).toBe(true);
    expect(text(refused)).toMatch(/refused by the provider's policy, rule "[a-z-]+"/);
    expect(await ledgerBalance()).toBe(before);
    const broken = await call(client, "query", { sql: "SELECT nope FROM items" });
    expect(text(broken)).toMatch(/column "nope" does not exist \(SQLSTATE 42703\)/);
    // A failed cast quotes its input: the whole table, were the text not bounded.
    const leak = await call(client, "query", { sql: "SELECT (json_agg(i)::text)::int FROM items i" });
    expect(leak.isError).toBe(true);
    expect(text(leak)).toMatch(/invalid input syntax for type integer/);
    expect(Buffer.byteLength(text(leak))).toBeLessThan(600);
    // The balance tool writes the session's open window first.
    expect((await call(client, "balance")).isError).toBeFalsy();
    expect(await ledgerBalance()).toBe(before - 2n * costOfRows(1, PRICE));
  }, 30_000);

  it("insufficient balance is a tool error that says how much is missing and how to top up", async () => {
    const poorKey = generatePrivateKey();
    const poor = privateKeyToAddress(poorKey).toLowerCase();
    await creditAgent(meta.db.url, poor, providerId, 3000n);
    const client = await stdioClient({}, poorKey);
    const result = await call(client, "query", { sql: "SELECT id FROM items", max_rows: 10 });
    expect(result.isError).toBe(true);
    // Two rows were paid for and delivered before the cut-off.
    expect(text(result)).toContain("cut off after 2 rows");
    expect(text(result)).toContain(`charged ${formatMicro(costOfRows(2, PRICE))} USDC`);
    expect(text(result)).toContain(`so ${formatMicro(costOfRows(10, PRICE))} USDC is missing`);
    expect(text(result)).toContain(providerWallet.toLowerCase());
    expect(text(result)).toContain("POST /api/deposit");
    expect(await ledgerBalance(poor)).toBe(0n);
  }, 30_000);

  it("reconnects after its proxy session is dropped, and keeps charging exactly", async () => {
    const client = await stdioClient();
    await call(client, "balance");
    const admin = new pg.Client({ connectionString: providerDb.adminUrl });
    await admin.connect();
    const { rowCount } = await admin.query(
      "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'pgtoll-mcp' AND datname = current_database()",
    );
    await admin.end();
    expect(rowCount).toBeGreaterThan(0);
    await new Promise((resolve) => setTimeout(resolve, 300));
    const before = await ledgerBalance();
    const after = (await call(client, "query", { sql: "SELECT id FROM items WHERE id <= 7" }))
      .structuredContent as {
      rowCount: number;
      balance: string;
    };
    expect(after.rowCount).toBe(7);
    expect(after.balance).toBe(formatMicro(before - costOfRows(7, PRICE)));
  }, 30_000);

  it("the deposit tool sends USDC on the local chain, waits for it, and credits it; off unless allowed", async () => {
    expect((await (await stdioClient()).listTools()).tools.map((tool) => tool.name)).not.toContain("deposit");
    const client = await stdioClient({
      PGTOLL_MCP_ALLOW_DEPOSIT: "on",
      PGTOLL_MCP_DEPOSIT_MAX: "5",
      PGTOLL_RPC_URL: chain.rpcUrl,
      PGTOLL_CHAIN_ID: "8453",
      PGTOLL_TOKEN_ADDRESS: token.address,
    });
    const before = await ledgerBalance();
    const onChainBefore = await tokenBalance(chain, token, providerWallet);
    const deposit = await call(client, "deposit", { amount: "2.5" });
    expect(deposit.isError, text(deposit)).toBeFalsy();
    const made = deposit.structuredContent as { txHash: string; amount: string; balance: string };
    expect(made.txHash).toMatch(/^0x[0-9a-f]{64}$/);
    expect(made.amount).toBe("2.500000");
    expect(made.balance).toBe(formatMicro(before + 2_500_000n));
    expect(await tokenBalance(chain, token, providerWallet)).toBe(onChainBefore + 2_500_000n);
    const tooMuch = await call(client, "deposit", { amount: "6" });
    expect(tooMuch.isError).toBe(true);
    expect(text(tooMuch)).toMatch(/at most 5.000000 USDC per deposit/);
    expect(await ledgerBalance()).toBe(before + 2_500_000n);
  }, 60_000);
});

describe("an agent with no balance yet, over stdio", () => {
  it("answers balance without a session, says how to fund a query, and funds itself with the deposit tool", async () => {
    const fresh = chain.accounts[3]!;
    await mintTokens(chain, chain.accounts[0]!.privateKey, token, fresh.address, 5_000_000n);
    const client = await stdioClient(
      {
        PGTOLL_MCP_ALLOW_DEPOSIT: "on",
        PGTOLL_RPC_URL: chain.rpcUrl,
        PGTOLL_CHAIN_ID: "8453",
        PGTOLL_TOKEN_ADDRESS: token.address,
      },
      fresh.privateKey,
    );
    const balance = await call(client, "balance");
    expect(balance.isError, text(balance)).toBeFalsy();
    expect(balance.structuredContent).toEqual({
      balance: "0.000000",
      pricePer1000Rows: "1.500000",
      price: "1.500000",
      dailyLimit: null,
      spentToday: "0.000000",
      remainingToday: null,
      resetsAt: expect.stringMatching(/T00:00:00\.000Z$/),
      depositAddress: providerWallet.toLowerCase(),
    });
    const refused = await call(client, "query", { sql: "SELECT id FROM items", max_rows: 10 });
    expect(refused.isError).toBe(true);
    expect(text(refused)).toContain(
      `insufficient funds: 0.000000 USDC available with provider ${providerId}`,
    );
    expect(text(refused)).toContain(`so ${formatMicro(costOfRows(10, PRICE))} USDC is missing`);
    expect(text(refused)).toContain("call the deposit tool");

    const deposit = await call(client, "deposit", { amount: "1" });
    expect(deposit.isError, text(deposit)).toBeFalsy();
    expect(deposit.structuredContent).toMatchObject({ amount: "1.000000", balance: "1.000000" });
    const query = await call(client, "query", { sql: "SELECT id FROM items WHERE id <= 2" });
    expect(query.structuredContent).toMatchObject({
      rowCount: 2,
      balance: formatMicro(1_000_000n - costOfRows(2, PRICE)),
    });
    expect(await ledgerBalance(fresh.address.toLowerCase())).toBe(1_000_000n - costOfRows(2, PRICE));
  }, 90_000);
});

describe("the remote MCP endpoint's authentication", () => {
  const initialize = (authorization?: string) =>
    fetch(`${pgtoll.httpUrl}/mcp?provider=${providerId}`, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        accept: "application/json, text/event-stream",
        ...(authorization ? { authorization } : {}),
      },
      body: JSON.stringify({
        jsonrpc: "2.0",
        id: 1,
        method: "initialize",
        params: {
          protocolVersion: "2025-06-18",
          capabilities: {},
          clientInfo: { name: "curl", version: "1" },
        },
      }),
    });

  it("answers 401 with a Bearer challenge to a missing, expired or wrongly signed token", async () => {
    const missing = await initialize();
    expect(missing.status).toBe(401);
    expect(missing.headers.get("www-authenticate")).toBe('Bearer realm="pgtoll"');
    const expired = await initialize(
      `Bearer ${await createAgentToken(agentKey, providerId, Date.now() - 2 * 3600_000)}`,
    );
    expect(expired.status).toBe(401);
    expect(expired.headers.get("www-authenticate")).toMatch(/error="invalid_token".*expired/);
    const forged = await initialize("Bearer pgtoll1.1.0xdead");
    expect(forged.status).toBe(401);
    expect((await forged.json()) as { error: string }).toMatchObject({
      error: expect.stringMatching(/not a pgtoll agent token/),
    });
    const valid = await initialize(`Bearer ${await createAgentToken(agentKey, providerId)}`);
    expect(valid.status).toBe(200);
    expect(valid.headers.get("mcp-session-id")).toMatch(/^[0-9a-f-]{36}$/);
  }, 30_000);

  it("answers 401 to a token signed for another provider, and opens no session", async () => {
    const other = await registerProviderOver(pgtoll.httpUrl, providerDb.url, {
      basePricePer1000Rows: 1,
      markupMultiplier: 1,
    });
    const forOther = await createAgentToken(agentKey, other);
    const response = await initialize(`Bearer ${forOther}`);
    expect(response.status).toBe(401);
    expect(response.headers.get("mcp-session-id")).toBeNull();
    expect(response.headers.get("www-authenticate")).toMatch(/error="invalid_token"/);
    expect(((await response.json()) as { error: string }).error).toMatch(
      /not signed by the wallet it names for this provider/,
    );
    // a token without the wallet it was signed by cannot be checked at all
    const [prefix, issued, , signature] = (await createAgentToken(agentKey, providerId)).split(".");
    const unnamed = await initialize(`Bearer ${prefix}.${issued}.${signature}`);
    expect(unnamed.status).toBe(401);
    expect(((await unnamed.json()) as { error: string }).error).toMatch(/names no wallet/);
  }, 30_000);

  it("a session answers only its own agent; an unknown session is 404", async () => {
    const opened = await initialize(`Bearer ${await createAgentToken(agentKey, providerId)}`);
    const sessionId = opened.headers.get("mcp-session-id") ?? "";
    const otherKey = generatePrivateKey();
    const list = (bearer: string, session: string) =>
      fetch(`${pgtoll.httpUrl}/mcp?provider=${providerId}`, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          accept: "application/json, text/event-stream",
          authorization: `Bearer ${bearer}`,
          "mcp-session-id": session,
          "mcp-protocol-version": "2025-06-18",
        },
        body: JSON.stringify({ jsonrpc: "2.0", id: 2, method: "tools/list" }),
      });
    expect((await list(await createAgentToken(otherKey, providerId), sessionId)).status).toBe(401);
    expect(
      (await list(await createAgentToken(agentKey, providerId), "00000000-0000-4000-8000-000000000000"))
        .status,
    ).toBe(404);
  }, 30_000);

  it("is rate-limited per agent, not per IP", async () => {
    const limited = await startPgtollProcess(meta.db.url, {
      PGTOLL_RATE_LIMIT: "on",
      PGTOLL_MCP_RATE_LIMIT: "3",
    });
    try {
      const post = async (key: Hex) =>
        fetch(`${limited.httpUrl}/mcp?provider=${providerId}`, {
          method: "POST",
          headers: {
            "content-type": "application/json",
            accept: "application/json, text/event-stream",
            authorization: `Bearer ${await createAgentToken(key, providerId)}`,
          },
          body: JSON.stringify({
            jsonrpc: "2.0",
            id: 1,
            method: "initialize",
            params: {
              protocolVersion: "2025-06-18",
              capabilities: {},
              clientInfo: { name: "curl", version: "1" },
            },
          }),
        });
      const statuses = [];
      for (let i = 0; i < 4; i++) statuses.push((await post(agentKey)).status);
      expect(statuses).toEqual([200, 200, 200, 429]);
      // Another agent on the same address is not held back by the first one's requests.
      expect((await post(generatePrivateKey())).status).toBe(200);
    } finally {
      await limited.stop();
    }
  }, 60_000);
});
