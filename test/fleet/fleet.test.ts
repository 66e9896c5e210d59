import { existsSync } from "node:fs";
import { mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { generatePrivateKey, privateKeyToAddress } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { costOfRows, priceOf } from "../../src/billing/cost.js";
import { formatMicro } from "../../src/billing/money.js";
import { createAgentToken } from "../../src/proxy/agent-token.js";
import { runCli } from "../support/cli.js";
import { createMetadataDatabase, type TestDatabase } from "../support/database.js";
import {
  type FleetMember,
  freePort,
  postFrom,
  socketFrom,
  startHaproxy,
  startRedis,
} from "../support/fleet.js";
import { createProviderDatabase } from "../support/gateway.js";
import {
  creditAgent,
  ledgerStateOf,
  type PgtollProcess,
  registerProviderOver,
  startPgtollProcess,
} from "../support/pgtoll-process.js";
import { waitFor } from "../support/real-clients.js";

/** 1 USDC per 1000 rows with a markup of 1.5: 1500 micro-USDC a row. */
const PRICE = priceOf({ priceMicroPer1000Rows: 1_000_000n, markupPpm: 1_500_000n });
const WIRE_SESSIONS = 50;
const WIRE_AGENTS = 5;
const REST_AGENTS = 4;
/** The gateway's query limit per client address and 15 minutes, shared by the fleet through Redis. */
const REST_QUERIES = 20;
const FUNDED = 200_000_000n;
/** 300 rows' worth: the poor agent's sessions run into it on every process. */
const POOR_FUNDED = 450_000n;
const missing = ["/usr/sbin/haproxy", "/usr/bin/redis-server"].filter((path) => !existsSync(path));

interface Agent {
  key: `0x${string}`;
  wallet: string;
  token: string;
  funded: bigint;
  /** What the test itself counted: the cost rule over the rows each statement delivered. */
  expectedMicro: bigint;
}

interface Member extends FleetMember {
  dataDir: string;
  process: PgtollProcess;
}

const stats = {
  statements: 0,
  reconnects: 0,
  refusedForFunds: 0,
  restQueries: 0,
  unexpected: [] as string[],
};
let meta: { db: TestDatabase; close(): Promise<void> };
let providerDb: TestDatabase;
let redis: Awaited<ReturnType<typeof startRedis>>;
let haproxy: Awaited<ReturnType<typeof startHaproxy>>;
const members: Member[] = [];

function memberEnv(member: FleetMember): Record<string, string> {
  return {
    REDIS_URL: redis.url,
    PGTOLL_HTTP_PORT: String(member.httpPort),
    PGTOLL_PROXY_PORT: String(member.proxyPort),
    PGTOLL_PROXY_PUBLIC_PORT: String(haproxy.proxyPort),
    PGTOLL_TRUSTED_PROXIES: "127.0.0.1/32",
    PGTOLL_TRUST_PROXY: "on",
    PGTOLL_RATE_LIMIT: "on",
    PGTOLL_SHUTDOWN_GRACE_MS: "10000",
    // HAProxy checks every 250 ms and takes a server out after two failures.
    PGTOLL_SHUTDOWN_DELAY_MS: "750",
    LOG_LEVEL: "info",
  };
}

beforeAll(async () => {
  if (missing.length > 0) return;
  meta = await createMetadataDatabase();
  providerDb = await createProviderDatabase(100);
  redis = await startRedis();
  const ports: FleetMember[] = [];
  for (let i = 0; i < 3; i++) ports.push({ httpPort: await freePort(), proxyPort: await freePort() });
  haproxy = await startHaproxy(ports);
  for (const member of ports) {
    const dataDir = await mkdtemp(join(tmpdir(), "pgtoll-fleet-"));
    members.push({
      ...member,
      dataDir,
      process: await startPgtollProcess(meta.db.url, memberEnv(member), dataDir),
    });
  }
}, 120_000);
afterAll(async () => {
  await Promise.all(members.map((member) => member.process.kill()));
  await haproxy?.stop();
  await redis?.stop();
  await providerDb?.drop();
  await meta?.close();
});

async function newAgent(providerId: string, funded: bigint): Promise<Agent> {
  const key = generatePrivateKey();
  const wallet = privateKeyToAddress(key).toLowerCase();
  await creditAgent(meta.db.url, wallet, providerId, funded);
  return { key, wallet, token: await createAgentToken(key, providerId), funded, expectedMicro: 0n };
}

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const someRows = () => 1 + Math.floor(Math.random() * 20);

/** One wire client through HAProxy, reconnecting after each documented 57P01, until `done()`. */
async function wireWorker(agent: Agent, providerId: string, done: () => boolean): Promise<void> {
  while (!done()) {
    const client = new pg.Client({
      host: "127.0.0.1",
      port: haproxy.proxyPort,
      user: agent.wallet,
      database: providerId,
      password: agent.token,
    });
    let lost: (Error & { code?: string }) | undefined;
    client.on("error", (error) => (lost ??= error));
    const select = async () => {
      const rows = someRows();
      try {
        const result = await client.query(`SELECT id, name FROM items WHERE id <= ${rows}`);
        agent.expectedMicro += costOfRows(result.rowCount ?? 0, PRICE);
      } catch (error) {
        const { code, message } = error as { code?: string; message: string };
        if (code !== "PT402") throw error;
        // Cut off when the balance ran out ("… after N rows, which were charged"), or refused before it ran.
        stats.refusedForFunds++;
        agent.expectedMicro += costOfRows(Number(/cut off after (\d+) rows/.exec(message)?.[1] ?? 0), PRICE);
      }
      stats.statements++;
    };
    let connected = false;
    try {
      await client.connect();
      connected = true;
      while (!done() && !lost) {
        if (Math.random() < 0.3) {
          await client.query("BEGIN");
          await select();
          await select();
          await client.query("COMMIT");
          stats.statements += 2;
        } else await select();
        await pause(50 + Math.random() * 100);
      }
    } catch (error) {
      lost ??= error as Error & { code?: string };
    } finally {
      await client.end().catch(() => {});
    }
    if (!lost) continue;
    if (lost.code === "57P01") stats.reconnects++;
    else if (lost.code === "PT402")
      return; // the poor agent cannot open another session: its balance is spent
    else
      stats.unexpected.push(`${connected ? "in session" : "connecting"}: ${lost.code ?? ""} ${lost.message}`);
  }
}

/** `count` REST queries from `address` through HAProxy, spread over `spanMs`. */
async function restWorker(agent: Agent, providerId: string, address: string, count: number, spanMs: number) {
  for (let i = 0; i < count; i++) {
    const rows = someRows();
    const answer = await postFrom(address, haproxy.httpPort, "/api/query", {
      sql: `SELECT id FROM items WHERE id <= ${rows}`,
      agentWallet: agent.wallet,
      providerId,
    });
    if (answer.status !== 200) {
      stats.unexpected.push(`REST ${answer.status} ${JSON.stringify(answer.json)}`);
      continue;
    }
    const cost = costOfRows(answer.json.rowCount as number, PRICE);
    expect(answer.json.actualCost).toBe(formatMicro(cost));
    agent.expectedMicro += cost;
    stats.restQueries++;
    await pause(spanMs / count);
  }
}

/** SIGTERM each process in turn and start it again once the one before is back in rotation. */
async function rollingRestart() {
  const timings: { drainMs: number; sessionsMs: number; totalMs: number; startMs: number }[] = [];
  for (const member of members) {
    const signalled = performance.now();
    expect(await member.process.stop()).toBe(0);
    const drainMs = performance.now() - signalled;
    const drained = /"sessionsMs":(\d+),"totalMs":(\d+)/.exec(member.process.cli.stderr());
    const started = performance.now();
    member.process = await startPgtollProcess(meta.db.url, memberEnv(member), member.dataDir);
    timings.push({
      drainMs: Math.round(drainMs),
      sessionsMs: Number(drained?.[1]),
      totalMs: Number(drained?.[2]),
      startMs: Math.round(performance.now() - started),
    });
    // HAProxy takes it back after two good checks (250 ms apart).
    await pause(1000);
  }
  return timings;
}

async function endpointQuery(from: string, endpoint: { id: string; password: string }) {
  const client = new pg.Client({
    host: "127.0.0.1",
    port: haproxy.proxyPort,
    user: "neondb_owner",
    database: "neondb",
    password: endpoint.password,
    options: `endpoint=${endpoint.id}`,
    stream: () => socketFrom(from),
  });
  client.on("error", () => {});
  try {
    await client.connect();
    return (await client.query("SELECT 1 AS ok")).rows[0];
  } finally {
    await client.end().catch(() => {});
  }
}

describe.skipIf(missing.length > 0)(
  "three pgtoll processes behind HAProxy, restarted one after another",
  () => {
    it("lose no statement: charges exact, ledgers whole, no hold left, limits and allowlists held", async () => {
      const began = performance.now();
      const api = `http://127.0.0.1:${haproxy.httpPort}`;
      const providerId = await registerProviderOver(api, providerDb.url, {
        basePricePer1000Rows: 1,
        markupMultiplier: 1.5,
      });
      const wireAgents = await Promise.all(
        Array.from({ length: WIRE_AGENTS }, () => newAgent(providerId, FUNDED)),
      );
      const restAgents = await Promise.all(
        Array.from({ length: REST_AGENTS }, () => newAgent(providerId, FUNDED)),
      );
      const poor = await newAgent(providerId, POOR_FUNDED);

      // A project whose endpoint admits 127.0.0.2 only: HAProxy's PROXY header carries each client's address.
      const bootstrap = runCli(["admin", "bootstrap", "--email", "fleet@example.com"], {
        DATABASE_URL: meta.db.url,
      });
      expect(await bootstrap.exited, bootstrap.stderr()).toBe(0);
      const apiKey = bootstrap.stdout().trim().split("\n").pop()!;
      const created = await fetch(`${api}/api/v2/projects`, {
        method: "POST",
        headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/json" },
        body: JSON.stringify({
          project: { name: "fenced", settings: { allowed_ips: { ips: ["127.0.0.2"] } } },
        }),
      });
      expect(created.status).toBe(201);
      const project = (await created.json()) as {
        endpoints: { id: string }[];
        connection_uris: { connection_uri: string }[];
      };
      const endpoint = {
        id: project.endpoints[0]!.id,
        password: decodeURIComponent(new URL(project.connection_uris[0]!.connection_uri).password),
      };

      let stopping = false;
      const done = () => stopping;
      const wire = Array.from({ length: WIRE_SESSIONS }, (_, i) =>
        wireWorker(wireAgents[i % WIRE_AGENTS]!, providerId, done),
      );
      const poorSessions = Array.from({ length: 6 }, () => wireWorker(poor, providerId, done));
      const rest = restAgents.map((agent, i) =>
        restWorker(agent, providerId, `127.0.1.${i + 1}`, REST_QUERIES, 15_000),
      );
      await pause(2000);
      const timings = await rollingRestart();
      await pause(1000);
      stopping = true;
      await Promise.all([...wire, ...poorSessions, ...rest]);

      // Only the documented 57P01 reconnects failed; statements went on through every restart.
      expect(stats.unexpected, stats.unexpected.join("\n")).toEqual([]);
      expect(stats.reconnects).toBeGreaterThan(0);
      expect(stats.restQueries).toBe(REST_AGENTS * REST_QUERIES);
      // The query limit is one count across the fleet (Redis): the next query from the same address is refused.
      const limited = await postFrom("127.0.1.1", haproxy.httpPort, "/api/query", {
        sql: "SELECT 1",
        agentWallet: restAgents[0]!.wallet,
        providerId,
      });
      expect(limited.status).toBe(429);

      // Every charge exact to the micro-USDC, every ledger whole, no hold left anywhere.
      for (const agent of [...wireAgents, ...restAgents, poor]) {
        await waitFor(
          async () => {
            const state = await ledgerStateOf(meta.db.url, agent.wallet, providerId);
            return state.reservations === 0 && state.reservedMicro === 0n;
          },
          15_000,
          "every hold to be given back",
        );
        const state = await ledgerStateOf(meta.db.url, agent.wallet, providerId);
        expect(state.chained).toBe(true);
        expect(state.entriesSumMicro).toBe(state.balanceMicro);
        expect(agent.funded - state.balanceMicro).toBe(agent.expectedMicro);
      }
      // The poor agent's sessions, spread over the three processes, were stopped at its balance and no further.
      const poorState = await ledgerStateOf(meta.db.url, poor.wallet, providerId);
      expect(poorState.balanceMicro).toBeGreaterThanOrEqual(0n);
      expect(poorState.balanceMicro).toBeLessThan(costOfRows(20, PRICE));
      expect(stats.refusedForFunds).toBeGreaterThan(0);

      // The allowlist admits and refuses by the real client's address, after the restarts too.
      expect(await endpointQuery("127.0.0.2", endpoint)).toEqual({ ok: 1 });
      await expect(endpointQuery("127.0.0.3", endpoint)).rejects.toMatchObject({
        code: "28000",
        message: expect.stringMatching(/^This IP address 127\.0\.0\.3 is not allowed/),
      });

      console.info(
        `fleet figures ${JSON.stringify({ ...stats, unexpected: stats.unexpected.length, timings, seconds: Math.round((performance.now() - began) / 1000) })}`,
      );
      for (const member of members) expect(await member.process.stop()).toBe(0);
    }, 240_000);
  },
);
