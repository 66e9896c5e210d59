import { spawn } from "node:child_process";
import { loadavg } from "node:os";
import { fileURLToPath } from "node:url";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import pg from "pg";
import { generatePrivateKey, privateKeyToAddress } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createAgentToken } from "../../src/proxy/agent-token.js";
import { createMetadataDatabase, type OwnedTestDatabase, type TestDatabase } from "../support/database.js";
import { createProviderDatabase } from "../support/gateway.js";
import { remoteMcpClient, upstreamSessionsOf } from "../support/mcp-clients.js";
import {
  creditAgent,
  type PgtollProcess,
  registerProviderOver,
  startPgtollProcess,
} from "../support/pgtoll-process.js";

const root = fileURLToPath(new URL("../..", import.meta.url));
/** Wallets with no deposit, each hammering the wire proxy and the remote MCP endpoint. */
const ATTACKERS = 200;
/** A refused attacker tries again after about this long (0.5 to 1.5 times), as a reconnecting client would. */
const RETRY_MS = 3000;
/** The funded agent's statements per phase, on the wire and through MCP. */
const WIRE_QUERIES = 200;
const MCP_QUERIES = 30;
/** A statement or connect that takes longer than this is a failure: the lockout made it hang. */
const GENEROUS_MS = 30_000;
const MCP_SESSIONS = 120;
/** PGTOLL_FUNDED_RESERVE_PERCENT's default share of them is kept for funded agents. */
const MCP_SESSIONS_WITHOUT_FUNDS = 96;
/** The funded agent's address, and the two the attackers share (as the load balancer reports them). */
const FUNDED_ADDRESS = "198.51.100.9";
const ATTACKER_ADDRESSES = ["203.0.113.1", "203.0.113.2"];

let meta: { db: TestDatabase; close(): Promise<void> };
let providerDb: OwnedTestDatabase;
let pgtoll: PgtollProcess;
let providerId: string;
const fundedKey = generatePrivateKey();
const funded = privateKeyToAddress(fundedKey).toLowerCase();

beforeAll(async () => {
  meta = await createMetadataDatabase();
  providerDb = await createProviderDatabase(50);
  pgtoll = await startPgtollProcess(meta.db.url, {
    PGTOLL_PROXY_UPSTREAM_LIMIT: "50",
    // A funded agent waiting this long for an upstream session is locked out (53300).
    PGTOLL_PROXY_QUEUE_TIMEOUT_MS: "5000",
    // Clients' addresses come from X-Forwarded-For, as behind a load balancer.
    PGTOLL_TRUST_PROXY: "on",
    PGTOLL_MCP_MAX_SESSIONS: String(MCP_SESSIONS),
  });
  providerId = await registerProviderOver(pgtoll.httpUrl, providerDb.url, {
    basePricePer1000Rows: 1,
    markupMultiplier: 1,
  });
  await creditAgent(meta.db.url, funded, providerId, 100_000_000n);
}, 120_000);
afterAll(async () => {
  await pgtoll?.stop();
  await providerDb?.drop();
  await meta?.close();
});

function figures(samples: number[]) {
  const sorted = [...samples].sort((a, b) => a - b);
  const at = (p: number) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
  return { n: sorted.length, p50: Math.round(at(50) * 10) / 10, p99: Math.round(at(99) * 10) / 10 };
}

/** The funded agent's workload: a wire session's connect and statements, and MCP `query` calls; in ms. */
async function fundedWorkload() {
  const wire: number[] = [];
  const mcp: number[] = [];
  let started = performance.now();
  const client = new pg.Client({
    host: "127.0.0.1",
    port: pgtoll.proxyPort,
    user: funded,
    database: providerId,
    password: await createAgentToken(fundedKey, providerId),
    connectionTimeoutMillis: GENEROUS_MS,
    query_timeout: GENEROUS_MS,
  });
  await client.connect();
  const connectMs = performance.now() - started;
  try {
    for (let i = 0; i < WIRE_QUERIES; i++) {
      started = performance.now();
      const { rowCount } = await client.query("SELECT id FROM items WHERE id <= $1", [5]);
      wire.push(performance.now() - started);
      expect(rowCount).toBe(5);
    }
  } finally {
    await client.end();
  }
  const token = await createAgentToken(fundedKey, providerId);
  started = performance.now();
  const { client: session } = await remoteMcpClient(
    pgtoll.httpUrl,
    providerId,
    token,
    FUNDED_ADDRESS,
    GENEROUS_MS,
  );
  const mcpInitializeMs = performance.now() - started;
  try {
    for (let i = 0; i < MCP_QUERIES; i++) {
      started = performance.now();
      const result = (await session.callTool(
        { name: "query", arguments: { sql: "SELECT id FROM items WHERE id <= 3" } },
        undefined,
        { timeout: GENEROUS_MS },
      )) as CallToolResult;
      mcp.push(performance.now() - started);
      expect(result.isError, JSON.stringify(result.content)).toBeFalsy();
      expect((result.structuredContent as { rowCount: number }).rowCount).toBe(3);
    }
  } finally {
    await session.close();
  }
  return {
    wireConnectMs: Math.round(connectMs),
    wire: figures(wire),
    mcpInitializeMs: Math.round(mcpInitializeMs),
    mcp: figures(mcp),
  };
}

function startAttack() {
  const config = {
    httpUrl: pgtoll.httpUrl,
    proxyPort: pgtoll.proxyPort,
    providerId,
    wallets: ATTACKERS,
    retryMs: RETRY_MS,
    addresses: ATTACKER_ADDRESSES,
  };
  const child = spawn(
    process.execPath,
    ["--import", "tsx", "test/support/lockout-attack.ts", JSON.stringify(config)],
    { cwd: root, stdio: ["ignore", "pipe", "pipe"] },
  );
  let out = "";
  let err = "";
  child.stdout.on("data", (chunk) => (out += chunk));
  child.stderr.on("data", (chunk) => (err += chunk));
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  return {
    async ready() {
      const deadline = Date.now() + 120_000;
      while (!out.includes("ready")) {
        if (child.exitCode !== null || Date.now() > deadline) throw new Error(`attack did not start: ${err}`);
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    },
    async stop(): Promise<Record<string, unknown>> {
      child.kill("SIGTERM");
      await exited;
      return JSON.parse(out.trim().split("\n").at(-1) ?? "{}") as Record<string, unknown>;
    },
  };
}

describe("wallets with no deposit cannot lock a funded agent out", () => {
  it(`${ATTACKERS} unfunded wallets on the wire and MCP: the funded agent's queries all succeed`, async () => {
    const quiet = await fundedWorkload();
    // The funded agent's MCP session gives its proxy session back once idle (PGTOLL_MCP_PROXY_IDLE_MS, 10 s).
    await expect
      .poll(() => upstreamSessionsOf(providerDb.adminUrl, "pgtoll-mcp"), { timeout: 20_000, interval: 500 })
      .toBe(0);

    const attack = startAttack();
    let counts: Record<string, unknown> = {};
    try {
      await attack.ready();
      // No session of a wallet without funds reaches the provider's database, on either surface.
      const attackerUpstream = await upstreamSessionsOf(providerDb.adminUrl, "attacker");
      const mcpUpstream = await upstreamSessionsOf(providerDb.adminUrl, "pgtoll-mcp");
      const attacked = await fundedWorkload();
      counts = await attack.stop();
      console.log(
        JSON.stringify({ attackers: ATTACKERS, retryMs: RETRY_MS, quiet, attacked, counts, load: loadavg() }),
      );
      expect(attackerUpstream).toBe(0);
      expect(mcpUpstream).toBe(0);
      expect(counts.wireHeld).toBe(0);
      // Their MCP sessions stay out of the share kept for funded agents, which the funded agent then used.
      expect(counts.mcpHeld).toBeLessThanOrEqual(MCP_SESSIONS_WITHOUT_FUNDS);
      expect(counts.mcpRefused).toBeGreaterThan(0);
      expect(counts.balanceCalls).toBeGreaterThan(0);
    } finally {
      if (!("wireHeld" in counts)) await attack.stop().catch(() => {});
    }
  }, 300_000);
});
