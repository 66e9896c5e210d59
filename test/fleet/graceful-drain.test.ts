import pg from "pg";
import { generatePrivateKey, privateKeyToAddress } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { costOfRows, priceOf } from "../../src/billing/cost.js";
import { createAgentToken } from "../../src/proxy/agent-token.js";
import { createMetadataDatabase, runSql, type TestDatabase } from "../support/database.js";
import { createProviderDatabase } from "../support/gateway.js";
import {
  creditAgent,
  ledgerStateOf,
  type PgtollProcess,
  registerProviderOver,
  startPgtollProcess,
} from "../support/pgtoll-process.js";
import { waitFor } from "../support/real-clients.js";

/** 1 USDC per 1000 rows: a row costs 1000 micro-USDC. */
const PRICE = priceOf({ priceMicroPer1000Rows: 1_000_000n, markupPpm: 1_000_000n });
const FUNDED = 5_000_000n;

let meta: { db: TestDatabase; close(): Promise<void> };
let providerDb: TestDatabase;
const running: PgtollProcess[] = [];

beforeAll(async () => {
  meta = await createMetadataDatabase();
  providerDb = await createProviderDatabase(100);
}, 120_000);
afterAll(async () => {
  await Promise.all(running.map((process) => process.kill()));
  await providerDb?.drop();
  await meta?.close();
});

async function start(env: Record<string, string>) {
  const process = await startPgtollProcess(meta.db.url, env);
  running.push(process);
  return process;
}

async function fundedAgent(httpUrl: string) {
  const providerId = await registerProviderOver(httpUrl, providerDb.url, {
    basePricePer1000Rows: 1,
    markupMultiplier: 1,
  });
  const key = generatePrivateKey();
  const wallet = privateKeyToAddress(key).toLowerCase();
  await creditAgent(meta.db.url, wallet, providerId, FUNDED);
  return { providerId, key, wallet };
}

type Agent = Awaited<ReturnType<typeof fundedAgent>>;

/** A node-postgres session; the errors it hears between queries (a FATAL from a stopping server) are kept. */
async function connect(port: number, agent: Agent) {
  const client = new pg.Client({
    host: "127.0.0.1",
    port,
    user: agent.wallet,
    database: agent.providerId,
    password: await createAgentToken(agent.key, agent.providerId),
  });
  const heard: (Error & { code?: string })[] = [];
  client.on("error", (error) => heard.push(error));
  await client.connect();
  return { client, heard };
}

async function chargedInLedger(agent: Agent) {
  const state = await ledgerStateOf(meta.db.url, agent.wallet, agent.providerId);
  expect(state).toMatchObject({ reservations: 0, reservedMicro: 0n, chained: true });
  expect(state.entriesSumMicro).toBe(state.balanceMicro);
  return FUNDED - state.balanceMicro;
}

describe("pgtoll start drains on SIGTERM", () => {
  it("lets a transaction finish and commit, ends an idle session with 57P01, answers in-flight REST, exits 0", async () => {
    const proc = await start({ PGTOLL_SHUTDOWN_GRACE_MS: "20000", LOG_LEVEL: "info" });
    const agent = await fundedAgent(proc.httpUrl);
    expect((await fetch(`${proc.httpUrl}/ready`)).status).toBe(200);

    // Another agent of the same provider, with no session open when the signal comes.
    const lateKey = generatePrivateKey();
    const lateAgent = { ...agent, key: lateKey, wallet: privateKeyToAddress(lateKey).toLowerCase() };
    await creditAgent(meta.db.url, lateAgent.wallet, agent.providerId, FUNDED);

    const busy = await connect(proc.proxyPort, agent);
    const idle = await connect(proc.proxyPort, agent);
    await busy.client.query("BEGIN");
    const first = (await busy.client.query("SELECT id FROM items WHERE id <= 10")).rowCount ?? 0;
    const inserted =
      (await busy.client.query("INSERT INTO orders (item_id, name) VALUES (1, 'written while draining')"))
        .rowCount ?? 0;

    // A REST query still running upstream when the signal comes (50 rows, 20 ms each).
    const rest = fetch(`${proc.httpUrl}/api/query`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        sql: "SELECT id, pg_sleep(0.02) FROM items WHERE id <= 50",
        agentWallet: agent.wallet,
        providerId: agent.providerId,
      }),
    });
    await waitFor(
      async () =>
        (
          await runSql(
            "SELECT 1 FROM pg_stat_activity WHERE state = 'active' AND query LIKE '%pg_sleep(0.02)%' AND pid <> pg_backend_pid()",
            providerDb.url,
          )
        ).length > 0,
      10_000,
      "the REST query to run upstream",
    );
    proc.cli.child.kill("SIGTERM");
    const signalled = performance.now();
    const idleEnded = new Promise<number>((resolve) =>
      idle.client.once("error", () => resolve(performance.now() - signalled)),
    );

    // Not ready at once; still alive.
    await waitFor(
      async () => (await fetch(`${proc.httpUrl}/ready`)).status === 503,
      5000,
      "/ready to say 503",
    );
    expect((await fetch(`${proc.httpUrl}/health`)).status).toBe(200);
    // The idle session is ended with the documented FATAL; new wire connections are refused.
    await waitFor(() => idle.heard.length > 0, 5000, "the idle session to be ended");
    expect(idle.heard[0]).toMatchObject({ code: "57P01" });
    expect(idle.heard[0]?.message).toMatch(/server is restarting/);
    await expect(connect(proc.proxyPort, agent)).rejects.toMatchObject({ code: "ECONNREFUSED" });
    // A REST request that reaches pgtoll while it drains (a balancer not yet aware of it) is answered: the session
    // opened for it then ends after its answer, not before its query.
    const late = await fetch(`${proc.httpUrl}/api/query`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        sql: "SELECT id FROM items WHERE id <= 3",
        agentWallet: lateAgent.wallet,
        providerId: agent.providerId,
      }),
    });
    expect(late.status, await late.clone().text()).toBe(200);
    expect(((await late.json()) as { rowCount: number }).rowCount).toBe(3);

    // The open transaction goes on and commits; then its session is ended the same way.
    const second = (await busy.client.query("SELECT id FROM items WHERE id <= 20")).rowCount ?? 0;
    await busy.client.query("COMMIT");
    const committed = performance.now();
    await waitFor(() => busy.heard.length > 0, 5000, "the session to be ended after its commit");
    expect(busy.heard[0]).toMatchObject({ code: "57P01" });

    const answered = await rest;
    expect(answered.status).toBe(200);
    expect(((await answered.json()) as { rowCount: number }).rowCount).toBe(50);
    expect(await proc.cli.exited).toBe(0);
    const exitedMs = performance.now() - signalled;
    const exitAfterCommitMs = performance.now() - committed;
    console.info(
      `drain figures ${JSON.stringify({ idleSessionEndedMs: Math.round(await idleEnded), exitedMs: Math.round(exitedMs), exitAfterCommitMs: Math.round(exitAfterCommitMs), drained: /"sessionsMs":\d+,"totalMs":\d+/.exec(proc.cli.stderr())?.[0] })}`,
    );

    const written = await runSql(
      "SELECT 1 FROM orders WHERE name = 'written while draining'",
      providerDb.url,
    );
    expect(written).toHaveLength(1);
    expect(first + inserted + second).toBe(31);
    expect(await chargedInLedger(agent)).toBe(
      costOfRows(first, PRICE) +
        costOfRows(inserted, PRICE) +
        costOfRows(second, PRICE) +
        costOfRows(50, PRICE),
    );
    expect(await chargedInLedger(lateAgent)).toBe(costOfRows(3, PRICE));
    await busy.client.end().catch(() => {});
    await idle.client.end().catch(() => {});
  });

  it("ends a transaction left open when the grace is over, with 57P01, and gives its hold back", async () => {
    const proc = await start({ PGTOLL_SHUTDOWN_GRACE_MS: "1000" });
    const agent = await fundedAgent(proc.httpUrl);
    const stuck = await connect(proc.proxyPort, agent);
    await stuck.client.query("BEGIN");
    const rows = (await stuck.client.query("SELECT id FROM items WHERE id <= 7")).rowCount ?? 0;
    proc.cli.child.kill("SIGTERM");
    expect(await proc.cli.exited).toBe(0);
    expect(stuck.heard[0]).toMatchObject({ code: "57P01" });
    expect(await chargedInLedger(agent)).toBe(costOfRows(rows, PRICE));
    await stuck.client.end().catch(() => {});
  });

  it("serves new connections as before for PGTOLL_SHUTDOWN_DELAY_MS while /ready says 503, then drains them", async () => {
    const proc = await start({ PGTOLL_SHUTDOWN_DELAY_MS: "1500", PGTOLL_SHUTDOWN_GRACE_MS: "5000" });
    const agent = await fundedAgent(proc.httpUrl);
    proc.cli.child.kill("SIGTERM");
    await waitFor(
      async () => (await fetch(`${proc.httpUrl}/ready`)).status === 503,
      5000,
      "/ready to say 503",
    );
    // The listener is still open: a balancer's last connections are served, not reset.
    const late = await connect(proc.proxyPort, agent);
    await late.client.query("BEGIN");
    expect((await late.client.query("SELECT id FROM items WHERE id <= 3")).rowCount).toBe(3);
    await late.client.query("COMMIT");
    expect(await proc.cli.exited).toBe(0);
    expect(late.heard[0]).toMatchObject({ code: "57P01" });
    await late.client.end().catch(() => {});
  });

  it("stops at once on a second signal", async () => {
    const proc = await start({ PGTOLL_SHUTDOWN_GRACE_MS: "60000" });
    const agent = await fundedAgent(proc.httpUrl);
    const stuck = await connect(proc.proxyPort, agent);
    await stuck.client.query("BEGIN");
    proc.cli.child.kill("SIGTERM");
    await waitFor(
      async () => (await fetch(`${proc.httpUrl}/ready`)).status === 503,
      5000,
      "/ready to say 503",
    );
    proc.cli.child.kill("SIGTERM");
    expect(await proc.cli.exited).toBe(1);
    await stuck.client.end().catch(() => {});
  });
});
