import type pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { checksumAddress } from "../../src/billing/address.js";
import { formatMicro } from "../../src/billing/money.js";
import type { OwnedTestDatabase } from "../support/database.js";
import {
  createProviderDatabase,
  registerPricedProvider,
  startTestGateway,
  type TestGateway,
} from "../support/gateway.js";
import {
  connectAgent,
  fundedTestAgent,
  startTestProxy,
  type TestAgent,
  type TestProxy,
} from "../support/proxy.js";
import { waitForCharges } from "../support/real-clients.js";

/**
 * A provider at 1 USDC per 1000 rows (1000 micro-USDC a row) whose agents run SQL over REST and the wire proxy;
 * every figure the analytics answer is compared with the ledger itself.
 */
let gateway: TestGateway;
let proxy: TestProxy;
let providerDb: OwnedTestDatabase;
let provider: { providerId: string; apiKey: string };
let other: { providerId: string; apiKey: string };
let restAgent: TestAgent;
let wireAgent: TestAgent;
const since = new Date(Date.now() - 60_000);

function get(url: string, apiKey = provider.apiKey) {
  return gateway.app.inject({ method: "GET", url, headers: { "x-api-key": apiKey } });
}

function rangeOf(path: string, extra = "") {
  const to = new Date(Date.now() + 60_000).toISOString();
  return `/api/providers/${provider.providerId}/${path}?from=${since.toISOString()}&to=${to}${extra}`;
}

async function rest(agent: TestAgent, sql: string) {
  return gateway.app.inject({
    method: "POST",
    url: "/api/query",
    payload: { sql, agentWallet: agent.wallet, providerId: provider.providerId },
  });
}

/** The provider's query entries as the ledger holds them. */
async function ledgerCharges() {
  const { rows } = await gateway.ctx.db.query<{
    agent_wallet: string;
    amount_micro: bigint;
    metadata: { rowCount?: number };
  }>(
    "SELECT agent_wallet, amount_micro, metadata FROM ledger_entries WHERE provider_id = $1 AND type = 'query'",
    [provider.providerId],
  );
  return rows;
}

beforeAll(async () => {
  gateway = await startTestGateway();
  proxy = await startTestProxy(gateway);
  providerDb = await createProviderDatabase(50);
  provider = await registerPricedProvider(gateway, providerDb.url);
  other = await registerPricedProvider(gateway, providerDb.url);
  restAgent = await fundedTestAgent(gateway, provider.providerId, 1_000_000n);
  wireAgent = await fundedTestAgent(gateway, provider.providerId, 1_000_000n);
  // REST: one shape called twice (3 and 4 rows), one refused by the policy.
  expect((await rest(restAgent, "SELECT name FROM items WHERE id <= 3")).statusCode).toBe(200);
  expect((await rest(restAgent, "SELECT name FROM items WHERE id <= 4")).statusCode).toBe(200);
  expect((await rest(restAgent, "DROP TABLE items")).statusCode).toBe(403);
  const unfunded = await fundedTestAgent(gateway, provider.providerId, 0n);
  expect((await rest(unfunded, "SELECT 1")).statusCode).toBe(402);
  // Wire proxy: 20 rows of one shape, 10 of another (30 000 micro-USDC), and a refused TRUNCATE.
  const client: pg.Client = await connectAgent(proxy, wireAgent, provider.providerId);
  await client.query("SELECT id FROM items WHERE id <= 10");
  await client.query("SELECT id FROM items WHERE id <= 10 AND id > 0");
  await client.query("SELECT id FROM items WHERE id > 40");
  await expect(client.query("TRUNCATE items")).rejects.toThrow(/not allowed/);
  await client.end();
  await waitForCharges(proxy);
  await gateway.ctx.metrics.refusals.flushTo(gateway.ctx.db);
});

afterAll(async () => {
  await proxy?.close();
  await gateway?.close();
  await providerDb?.drop();
});

describe("GET /api/providers/:id/summary", () => {
  it("sums the provider's charges as the ledger holds them, with the empty period before", async () => {
    const charges = await ledgerCharges();
    const revenue = charges.reduce((sum, entry) => sum - entry.amount_micro, 0n);
    const rows = charges.reduce((sum, entry) => sum + Number(entry.metadata.rowCount), 0);
    expect(revenue).toBe(37_000n);
    const res = await get(rangeOf("summary"));
    expect(res.statusCode, res.body).toBe(200);
    const body = res.json();
    expect(body.revenue).toEqual({ current: formatMicro(revenue), previous: "0.000000", change: null });
    expect(body.rows.current).toBe(rows);
    expect(body.statements.current).toBe(5);
    expect(body.activeAgents).toEqual({ current: 2, previous: 0, change: null });
    expect(body.averageCostPerStatement.current).toBe(formatMicro(revenue / 5n));
    expect(new Date(body.previousTo).getTime()).toBe(new Date(body.from).getTime());
  });

  it("compares with the previous period: a range after the charges had nothing, the one before all", async () => {
    const from = new Date(Date.now() + 60_000);
    const to = new Date(from.getTime() + 120_000);
    const res = await get(
      `/api/providers/${provider.providerId}/summary?from=${from.toISOString()}&to=${to.toISOString()}`,
    );
    const body = res.json();
    expect(body.revenue).toEqual({ current: "0.000000", previous: "0.037000", change: -1 });
    expect(body.activeAgents).toEqual({ current: 0, previous: 2, change: -1 });
  });
});

describe("GET /api/providers/:id/earnings", () => {
  it("has a bucket for every hour of the range, empty ones included, summing to the summary", async () => {
    const from = new Date(Math.floor(Date.now() / 3_600_000) * 3_600_000 - 3 * 3_600_000);
    const to = new Date(from.getTime() + 5 * 3_600_000);
    const res = await get(
      `/api/providers/${provider.providerId}/earnings?from=${from.toISOString()}&to=${to.toISOString()}&granularity=hour`,
    );
    expect(res.statusCode, res.body).toBe(200);
    const { buckets, granularity } = res.json();
    expect(granularity).toBe("hour");
    expect(buckets.map((b: { start: string }) => b.start)).toEqual(
      [0, 1, 2, 3, 4].map((h) => new Date(from.getTime() + h * 3_600_000).toISOString()),
    );
    const total = buckets.reduce((sum: number, b: { revenue: string }) => sum + Number(b.revenue), 0);
    expect(total.toFixed(6)).toBe("0.037000");
    expect(
      buckets.filter((b: { revenue: string }) => b.revenue === "0.000000").length,
    ).toBeGreaterThanOrEqual(3);
  });

  it("days start at midnight UTC", async () => {
    const res = await get(
      `/api/providers/${provider.providerId}/earnings?from=2026-01-01T12:00:00%2B02:00&to=2026-01-04&granularity=day`,
    );
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().buckets.map((b: { start: string }) => b.start)).toEqual([
      "2026-01-01T00:00:00.000Z",
      "2026-01-02T00:00:00.000Z",
      "2026-01-03T00:00:00.000Z",
    ]);
  });
});

describe("GET /api/providers/:id/agents", () => {
  it("ranks agents by spend a page at a time, with their balance now", async () => {
    const first = await get(rangeOf("agents", "&limit=1"));
    expect(first.statusCode, first.body).toBe(200);
    const page1 = first.json();
    expect(page1.agents).toEqual([
      {
        wallet: checksumAddress(wireAgent.wallet),
        spent: "0.030000",
        statements: 3,
        rows: 30,
        balance: "0.970000",
        lastActive: expect.stringMatching(/Z$/),
      },
    ]);
    expect(page1.nextCursor).toEqual(expect.any(String));
    const page2 = (await get(rangeOf("agents", `&limit=1&cursor=${page1.nextCursor}`))).json();
    expect(page2.agents.map((a: { wallet: string; spent: string }) => [a.wallet, a.spent])).toEqual([
      [checksumAddress(restAgent.wallet), "0.007000"],
    ]);
    expect(page2.nextCursor).toBeNull();
  });
});

describe("GET /api/providers/:id/statements", () => {
  it("ranks shapes by revenue from the proxy's windows and REST entries alike", async () => {
    const res = await get(rangeOf("statements"));
    expect(res.statusCode, res.body).toBe(200);
    const { statements, otherShapes } = res.json();
    const summary = statements.map((s: Record<string, unknown>) => [
      s.normalized,
      s.calls,
      s.rows,
      s.revenue,
    ]);
    // Three shapes earned 0.01 each (ties in fingerprint order), then the REST shape called twice.
    expect(summary.slice(0, 3)).toEqual(
      expect.arrayContaining([
        ["SELECT id FROM items WHERE id <= $1", 1, 10, "0.010000"],
        ["SELECT id FROM items WHERE id <= $1 AND id > $2", 1, 10, "0.010000"],
        ["SELECT id FROM items WHERE id > $1", 1, 10, "0.010000"],
      ]),
    );
    expect(summary[3]).toEqual(["SELECT name FROM items WHERE id <= $1", 2, 7, "0.007000"]);
    expect(statements[3].sample).toMatch(/^SELECT name FROM items WHERE id <= [34]$/);
    expect(otherShapes).toEqual({ calls: 0, rows: 0, revenue: "0.000000" });
  });
});

describe("GET /api/providers/:id/refusals", () => {
  it("counts refusals by rule and by funds, from the tally, not the ledger", async () => {
    const res = await get(rangeOf("refusals"));
    expect(res.statusCode, res.body).toBe(200);
    const body = res.json();
    expect(body.byRule).toEqual(expect.arrayContaining([{ rule: "no-drop", refusals: 1 }]));
    expect(body.byRule.reduce((sum: number, r: { refusals: number }) => sum + r.refusals, 0)).toBe(2);
    expect(body.byFunds).toEqual([{ reason: "insufficient-balance", refusals: 1 }]);
    expect(body.total).toBe(3);
  });
});

describe("authentication and parameters", () => {
  // The pricing is public: agents read prices before they query (providers.test.ts).
  const paths = ["summary", "earnings", "agents", "statements", "refusals", "database"];

  it.each(paths)("%s: 401 without a key and with another provider's key", async (path) => {
    const url = `/api/providers/${provider.providerId}/${path}`;
    const none = await gateway.app.inject({ method: "GET", url });
    expect(none.statusCode).toBe(401);
    const foreign = await get(url, other.apiKey);
    expect(foreign.statusCode).toBe(401);
    expect(foreign.json().error).toBe("invalid API key for this provider");
  });

  it("400 for a malformed provider id, 404 for an unknown one", async () => {
    expect((await get("/api/providers/nope/summary")).statusCode).toBe(400);
    const unknown = await get("/api/providers/00000000-0000-4000-8000-000000000000/summary");
    expect(unknown.statusCode).toBe(404);
  });

  it.each([
    ["summary?from=yesterday", "invalid from"],
    ["summary?to=2026-13-45", "invalid to"],
    ["summary?from=2026-02-01&to=2026-01-01", "invalid from: must be before to"],
    ["summary?from=2024-01-01&to=2026-01-01", "invalid from: a range covers at most"],
    ["earnings?granularity=week", "invalid granularity"],
    ["earnings?from=2026-01-01&to=2026-03-01&granularity=hour", "invalid granularity"],
    ["agents?limit=0", "invalid limit"],
    ["agents?limit=abc", "invalid limit"],
    ["statements?limit=101", "invalid limit"],
    ["agents?cursor=not-a-cursor", "invalid cursor"],
    [`agents?cursor=${Buffer.from('{"s":"x","w":"y"}').toString("base64url")}`, "invalid cursor"],
  ])("%s is 400 naming the parameter", async (query, message) => {
    const res = await get(`/api/providers/${provider.providerId}/${query}`);
    expect(res.statusCode, res.body).toBe(400);
    expect(res.json().error).toContain(message);
  });
});

describe("GET /api/providers/:id/pricing and /database", () => {
  it("reads back the pricing set with POST", async () => {
    const res = await get(`/api/providers/${provider.providerId}/pricing`);
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({ basePricePer1000Rows: 1, markupMultiplier: 1, readOnly: false });
  });

  it("says the registered database answers", async () => {
    const res = await get(`/api/providers/${provider.providerId}/database`);
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({ reachable: true, error: null, latencyMs: expect.any(Number) });
  });
});
