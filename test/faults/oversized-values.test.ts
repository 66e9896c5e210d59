import { readFileSync } from "node:fs";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import pg from "pg";
import type { Hex } from "viem";
import { generatePrivateKey, privateKeyToAddress } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createAgentToken } from "../../src/proxy/agent-token.js";
import { createMetadataDatabase, type TestDatabase } from "../support/database.js";
import { createProviderDatabase } from "../support/gateway.js";
import { remoteMcpClient } from "../support/mcp-clients.js";
import {
  creditAgent,
  ledgerStateOf,
  type PgtollProcess,
  registerProviderOver,
  startPgtollProcess,
} from "../support/pgtoll-process.js";
import { waitFor } from "../support/real-clients.js";

/** A value the size of the one that took the process down through REST (node-postgres's string limit). */
const HUGE = "SELECT repeat('x', 600000000) AS v";
/** Four of these at once raised the wire proxy's memory by 1.4 GB when rows were buffered whole. */
const LARGE = "SELECT repeat('x', 250000000) AS v";
/** Priced by the byte too: 250 MB cost 500 USDC, more than the agent has. */
const DEAR = { basePricePer1000Rows: 1, markupMultiplier: 1, pricePerMB: 2 };
/** Rows alone: the agent can pay for any value; only the row cap stops a large one. */
const CHEAP = { basePricePer1000Rows: 1, markupMultiplier: 1 };
const MIB = 1024 * 1024;
/** Building a 600 MB value takes PostgreSQL seconds on a loaded machine: the limits, not the timeout, must stop it. */
const SLOW_VALUES = { PGTOLL_STATEMENT_TIMEOUT_MS: "120000" };

let meta: { db: TestDatabase; close(): Promise<void> };
let providerDb: Awaited<ReturnType<typeof createProviderDatabase>>;
/** Default settings: PGTOLL_MAX_ROW_BYTES 16 MiB. */
let capped: PgtollProcess;
/** PGTOLL_MAX_ROW_BYTES at its highest (1 GiB): only what the agent can pay for stops a row. */
let uncapped: PgtollProcess;
const providers: Record<string, { dear: string; cheap: string }> = {};

interface Agent {
  key: Hex;
  wallet: string;
}

function newAgent(): Agent {
  const key = generatePrivateKey();
  return { key, wallet: privateKeyToAddress(key).toLowerCase() };
}

beforeAll(async () => {
  meta = await createMetadataDatabase();
  providerDb = await createProviderDatabase(20);
  [capped, uncapped] = await Promise.all([
    startPgtollProcess(meta.db.url, SLOW_VALUES),
    startPgtollProcess(meta.db.url, { ...SLOW_VALUES, PGTOLL_MAX_ROW_BYTES: String(1024 * MIB) }),
  ]);
  for (const [name, process] of [
    ["capped", capped],
    ["uncapped", uncapped],
  ] as const) {
    providers[name] = {
      dear: await registerProviderOver(process.httpUrl, providerDb.url, DEAR),
      cheap: await registerProviderOver(process.httpUrl, providerDb.url, CHEAP),
    };
  }
}, 120_000);
afterAll(async () => {
  await capped?.kill();
  await uncapped?.kill();
  await providerDb?.drop();
  await meta?.close();
});

function status(pid: number, field: "VmRSS" | "VmHWM"): number {
  const text = readFileSync(`/proc/${pid}/status`, "utf8");
  return Number(new RegExp(`${field}:\\s+(\\d+)`).exec(text)?.[1]) / 1024;
}

/** What an agent credited with 10 USDC has spent, once its sessions' holds are given back. */
async function spentOnceReleased(agent: Agent, providerId: string): Promise<bigint> {
  await waitFor(
    async () => (await ledgerStateOf(meta.db.url, agent.wallet, providerId)).reservations === 0,
    10_000,
    "the sessions' holds to be given back",
  );
  return 10_000_000n - (await ledgerStateOf(meta.db.url, agent.wallet, providerId)).balanceMicro;
}

async function wireClient(pgtoll: PgtollProcess, agent: Agent, providerId: string): Promise<pg.Client> {
  const client = new pg.Client({
    host: "127.0.0.1",
    port: pgtoll.proxyPort,
    user: agent.wallet,
    database: providerId,
    password: await createAgentToken(agent.key, providerId),
  });
  client.on("error", () => {});
  await client.connect();
  return client;
}

/** The SQLSTATE a statement fails with on the wire ("none" when it succeeds). */
async function wireFailure(client: pg.Client, sql: string): Promise<string> {
  try {
    await client.query(sql);
    return "none";
  } catch (error) {
    return (error as { code?: string }).code ?? String(error);
  }
}

function restQuery(pgtoll: PgtollProcess, agent: Agent, providerId: string, sql: string) {
  return fetch(`${pgtoll.httpUrl}/api/query`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ sql, agentWallet: agent.wallet, providerId }),
  });
}

/**
 * Four sessions read a 250 MB value each at once, twice; returns their SQLSTATEs and how far pgtoll's memory rose
 * above where it started: its peak (VmHWM, the kernel's own high-water mark), and its growth from the first round
 * to the second (memory kept from the first that the second does not reuse), in MB.
 */
async function fourLargeValues(pgtoll: PgtollProcess, providerId: string) {
  const pid = pgtoll.cli.child.pid!;
  const agent = newAgent();
  await creditAgent(meta.db.url, agent.wallet, providerId, 10_000_000n);
  const clients = await Promise.all(Array.from({ length: 4 }, () => wireClient(pgtoll, agent, providerId)));
  // The sessions' own memory is part of the start: what is measured is the values'.
  for (const client of clients) await client.query("SELECT 1");
  const before = status(pid, "VmRSS");
  const hwmBefore = status(pid, "VmHWM");
  const codes = await Promise.all(clients.map((client) => wireFailure(client, LARGE)));
  const afterFirst = status(pid, "VmRSS");
  codes.push(...(await Promise.all(clients.map((client) => wireFailure(client, LARGE)))));
  const peak = status(pid, "VmHWM");
  const afterSecond = status(pid, "VmRSS");
  // Each session goes on: its next statement is answered.
  for (const client of clients) expect((await client.query("SELECT 2 AS two")).rows[0].two).toBe(2);
  await Promise.all(clients.map((client) => client.end()));
  return {
    codes,
    peakGrowthMb: Math.max(peak, hwmBefore) - before,
    keptGrowthMb: afterSecond - afterFirst,
  };
}

describe("a value larger than an agent may read, on the wire", () => {
  it("is refused from its length word when the agent cannot pay for it: four at once grow pgtoll's memory by less than 300 MB, reused after", async () => {
    const { codes, peakGrowthMb, keptGrowthMb } = await fourLargeValues(uncapped, providers.uncapped!.dear);
    expect(codes).toEqual(Array(8).fill("PT402"));
    expect(peakGrowthMb).toBeLessThan(300);
    // Socket chunks freed by the garbage collector when it runs: a round may leave some tens of MB the next one
    // reuses. Rows buffered whole kept over a GB a round.
    expect(keptGrowthMb).toBeLessThan(100);
  }, 240_000);

  it("is refused from its length word above PGTOLL_MAX_ROW_BYTES when the agent could pay for it: the same bound", async () => {
    const { codes, peakGrowthMb, keptGrowthMb } = await fourLargeValues(capped, providers.capped!.cheap);
    expect(codes).toEqual(Array(8).fill("54000"));
    expect(peakGrowthMb).toBeLessThan(300);
    // Socket chunks freed by the garbage collector when it runs: a round may leave some tens of MB the next one
    // reuses. Rows buffered whole kept over a GB a round.
    expect(keptGrowthMb).toBeLessThan(100);
  }, 240_000);

  it("names the limit and the setting, and charges the rows before the large one only", async () => {
    const agent = newAgent();
    const providerId = providers.capped!.cheap;
    await creditAgent(meta.db.url, agent.wallet, providerId, 10_000_000n);
    const client = await wireClient(capped, agent, providerId);
    const error = await client
      .query(
        `SELECT CASE WHEN g < 3 THEN 'small' ELSE repeat('x', ${20 * MIB}) END AS v FROM generate_series(1, 5) g`,
      )
      .then(
        () => undefined,
        (failed: Error & { code?: string }) => failed,
      );
    expect(error?.code).toBe("54000");
    expect(error?.message).toContain(`${16 * MIB} bytes (PGTOLL_MAX_ROW_BYTES)`);
    expect(error?.message).toContain("cut off after 2 rows");
    expect((await client.query("SELECT id FROM items WHERE id <= 3")).rowCount).toBe(3);
    await client.end();
    const spent = await spentOnceReleased(agent, providerId);
    // 2 rows and then 3 rows at 1 USDC per 1000 rows: 0.005 USDC, nothing for the large row.
    expect(spent).toBe(5000n);
  }, 60_000);

  it("is read and relayed under the cap when the agent pays for it", async () => {
    const agent = newAgent();
    const providerId = providers.capped!.cheap;
    await creditAgent(meta.db.url, agent.wallet, providerId, 10_000_000n);
    const client = await wireClient(capped, agent, providerId);
    const { rows } = await client.query(
      `SELECT length(repeat('x', ${8 * MIB}) || '') AS n, repeat('y', ${4 * MIB}) AS v`,
    );
    expect(rows[0].n).toBe(8 * MIB);
    expect(rows[0].v.length).toBe(4 * MIB);
    const copied = await client.query(`SELECT repeat('z', ${2 * MIB}) AS v UNION ALL SELECT 'small'`);
    expect(copied.rows.map((row) => row.v.length)).toEqual([2 * MIB, 5]);
    await client.end();
  }, 60_000);
});

describe("large rows an agent pays for, on the wire", () => {
  it("pass through whole and in order to clients that stop reading for a while, and are charged as rows", async () => {
    const agent = newAgent();
    const providerId = providers.capped!.cheap;
    await creditAgent(meta.db.url, agent.wallet, providerId, 10_000_000n);
    const clients = await Promise.all(Array.from({ length: 4 }, () => wireClient(capped, agent, providerId)));
    const sql = `SELECT g, repeat(chr(64 + g), ${5 * MIB} + g) AS v FROM generate_series(1, 3) g`;
    const answers = clients.map((client) => {
      const answer = client.query(sql);
      // The client stops reading at once: the rows wait upstream (backpressure), not in pgtoll.
      (client as unknown as { connection: { stream: { pause(): void } } }).connection.stream.pause();
      return answer;
    });
    await new Promise((resolve) => setTimeout(resolve, 1000));
    for (const client of clients)
      (client as unknown as { connection: { stream: { resume(): void } } }).connection.stream.resume();
    for (const { rows } of await Promise.all(answers))
      expect(rows.map((row) => [row.g, row.v.length, row.v[0], row.v.at(-1)])).toEqual([
        [1, 5 * MIB + 1, "A", "A"],
        [2, 5 * MIB + 2, "B", "B"],
        [3, 5 * MIB + 3, "C", "C"],
      ]);
    // The statement after the streamed rows is framed and answered as usual.
    for (const client of clients) expect((await client.query("SELECT 2 AS two")).rows[0].two).toBe(2);
    await Promise.all(clients.map((client) => client.end()));
    // 4 sessions x (3 large rows + 1 row) at 1 USDC per 1000 rows.
    expect(await spentOnceReleased(agent, providerId)).toBe(16_000n);
  }, 120_000);
});

describe("no request takes pgtoll down", () => {
  async function everySurfaceAnswers(pgtoll: PgtollProcess, agent: Agent, providerId: string) {
    const rest = await restQuery(pgtoll, agent, providerId, "SELECT id FROM items WHERE id <= 2");
    expect(rest.status).toBe(200);
    const client = await wireClient(pgtoll, agent, providerId);
    expect((await client.query("SELECT id FROM items WHERE id <= 2")).rowCount).toBe(2);
    await client.end();
    const mcp = await remoteMcpClient(
      pgtoll.httpUrl,
      providerId,
      await createAgentToken(agent.key, providerId),
    );
    const result = (await mcp.client.callTool({
      name: "query",
      arguments: { sql: "SELECT id FROM items WHERE id <= 2" },
    })) as CallToolResult;
    expect(result.isError).toBeFalsy();
    await mcp.end();
  }

  for (const [name, cheap] of [
    ["the agent can pay for", true],
    ["the agent cannot pay for", false],
  ] as const) {
    it(`answers a 600 MB value ${name} with an error on REST, the wire and MCP, and serves every surface after`, async () => {
      const providerId = cheap ? providers.capped!.cheap : providers.capped!.dear;
      const agent = newAgent();
      // 100 USDC: never enough for the value at the dear price (1 200 USDC), and enough that what the holds of its
      // just-closed sessions still hold (given back in the background) leaves funds for the surfaces' last queries.
      await creditAgent(meta.db.url, agent.wallet, providerId, 100_000_000n);

      const rest = await restQuery(capped, agent, providerId, HUGE);
      const body = (await rest.json()) as { error: string; code?: string };
      expect(rest.status, JSON.stringify(body)).toBe(422);
      expect(body.code).toBe("row_too_large");
      expect(body.error).toContain("PGTOLL_MAX_ROW_BYTES");

      const client = await wireClient(capped, agent, providerId);
      expect(await wireFailure(client, HUGE)).toBe("54000");
      await client.end();

      const mcp = await remoteMcpClient(
        capped.httpUrl,
        providerId,
        await createAgentToken(agent.key, providerId),
      );
      const result = (await mcp.client.callTool({
        name: "query",
        arguments: { sql: HUGE },
      })) as CallToolResult;
      expect(result.isError).toBe(true);
      const text = result.content.map((part) => (part.type === "text" ? part.text : "")).join("");
      expect(text).toContain("PGTOLL_MAX_ROW_BYTES");
      await mcp.end();

      await everySurfaceAnswers(capped, agent, providerId);
      const ledger = await ledgerStateOf(meta.db.url, agent.wallet, providerId);
      expect(ledger.chained).toBe(true);
    }, 300_000);
  }

  it("answers a REST result above PGTOLL_MAX_RESULT_BYTES with the rows within it, charging only those", async () => {
    const providerId = providers.capped!.cheap;
    const agent = newAgent();
    await creditAgent(meta.db.url, agent.wallet, providerId, 10_000_000n);
    const rest = await restQuery(
      capped,
      agent,
      providerId,
      `SELECT repeat('x', ${8 * MIB}) AS v FROM generate_series(1, 6)`,
    );
    expect(rest.status).toBe(200);
    const body = (await rest.json()) as {
      rows: { v: string }[];
      rowCount: number;
      truncated: boolean;
      stoppedBy: { code: string; message: string };
    };
    // 32 MiB by default: three rows of 8 MiB fit, the fourth would pass it and is not relayed.
    expect(body.rows.map((row) => row.v.length)).toEqual([8 * MIB, 8 * MIB, 8 * MIB]);
    expect(body).toMatchObject({ rowCount: 3, truncated: true, stoppedBy: { code: "result_too_large" } });
    // Three rows at 1 USDC per 1000: all that was charged.
    const ledger = await ledgerStateOf(meta.db.url, agent.wallet, providerId);
    expect(ledger.balanceMicro).toBe(10_000_000n - 3000n);
    await everySurfaceAnswers(capped, agent, providerId);
  }, 60_000);
});
