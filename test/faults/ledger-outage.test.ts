import { chmod, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { generatePrivateKey, privateKeyToAddress } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { costOfRows, priceOf } from "../../src/billing/cost.js";
import { type EmbeddedCluster, startEmbeddedCluster } from "../../src/db/embedded.js";
import { createAgentToken } from "../../src/proxy/agent-token.js";
import type { TestDatabase } from "../support/database.js";
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
const FUNDED = 100_000_000n;
const OUTAGE_MS = 10_000;

let dir: string;
let ledger: EmbeddedCluster;
let providerDb: TestDatabase;
let pgtoll: PgtollProcess | undefined;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "pgtoll-ledger-outage-"));
  // Run as root, the embedded cluster runs as `postgres`, which must be able to pass through this directory.
  await chmod(dir, 0o711);
  ledger = await startEmbeddedCluster(join(dir, "ledger"));
  providerDb = await createProviderDatabase(100);
}, 120_000);
afterAll(async () => {
  await pgtoll?.kill();
  await ledger?.stop();
  await providerDb?.drop();
  await rm(dir, { recursive: true, force: true });
});

/** What one statement delivered: its rows, or the error that stopped it (a SQLSTATE and message). */
type Outcome = { rows: number } | { code: string; message: string };

async function run(client: pg.Client, sql: string): Promise<Outcome> {
  try {
    return { rows: (await client.query(sql)).rowCount ?? 0 };
  } catch (error) {
    const { code = "none", message } = error as { code?: string; message: string };
    return { code, message };
  }
}

/** Rows an outcome was charged for: a statement cut off mid-result names how many rows it delivered. */
function rowsCharged(outcome: Outcome): number {
  if ("rows" in outcome) return outcome.rows;
  return Number(/cut off after (\d+) rows/.exec(outcome.message)?.[1] ?? 0);
}

describe("the ledger database goes away for 10 s and comes back", () => {
  it("refuses what it cannot fund with a clear error, never serves free rows, and recovers by itself", async () => {
    pgtoll = await startPgtollProcess(ledger.adminUrl, { PGTOLL_RESERVATION_TTL_S: "30" });
    const { httpUrl, proxyPort } = pgtoll;
    const providerId = await registerProviderOver(httpUrl, providerDb.url, {
      basePricePer1000Rows: 1,
      markupMultiplier: 1,
    });
    const key = generatePrivateKey();
    const wallet = privateKeyToAddress(key).toLowerCase();
    await creditAgent(ledger.adminUrl, wallet, providerId, FUNDED);
    const connect = async () => {
      const client = new pg.Client({
        host: "127.0.0.1",
        port: proxyPort,
        user: wallet,
        database: providerId,
        password: await createAgentToken(key, providerId),
      });
      client.on("error", () => {});
      await client.connect();
      return client;
    };
    const query = (sql: string) =>
      fetch(`${httpUrl}/api/query`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ sql, agentWallet: wallet, providerId }),
      });
    const outcomes: Outcome[] = [];
    let restRows = 0;

    const session = await connect();
    for (let i = 0; i < 5; i++) outcomes.push(await run(session, "SELECT id FROM items WHERE id <= 20"));
    expect(outcomes.every((o) => "rows" in o && o.rows === 20)).toBe(true);

    await ledger.stop();
    const outageStarted = Date.now();
    const during: Outcome[] = [];
    let restDuring: Response | undefined;
    let healthDuring: Response | undefined;
    while (Date.now() - outageStarted < OUTAGE_MS) {
      // Large results outgrow the session's hold: they need the ledger.
      during.push(await run(session, "SELECT id FROM items WHERE id <= 100"));
      restDuring ??= await query("SELECT id FROM items WHERE id <= 3");
      healthDuring ??= await fetch(`${httpUrl}/api/health`);
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    outcomes.push(...during);
    const refused = during.filter((o): o is { code: string; message: string } => "code" in o);
    expect(refused.length).toBeGreaterThan(0);
    for (const outcome of refused) {
      expect(outcome.code).toBe("57P03");
      expect(outcome.message).toMatch(/the pgtoll ledger is unavailable/);
    }
    expect(restDuring?.status).toBe(503);
    expect(await restDuring?.json()).toEqual({ error: expect.stringMatching(/ledger is unavailable/) });
    expect(healthDuring?.status).toBe(503);

    ledger = await startEmbeddedCluster(join(dir, "ledger"), { port: ledger.port });
    const back = Date.now();
    await waitFor(
      async () => (await query("SELECT id FROM items WHERE id <= 3")).status === 200,
      20_000,
      "REST",
    );
    restRows += 3;
    const restRecoveredMs = Date.now() - back;
    await waitFor(
      async () => {
        const outcome = await run(session, "SELECT id FROM items WHERE id <= 100");
        outcomes.push(outcome);
        return "rows" in outcome;
      },
      20_000,
      "the open session",
    );
    const proxyRecoveredMs = Date.now() - back;
    const fresh = await connect();
    outcomes.push(await run(fresh, "SELECT id FROM items WHERE id <= 7"));
    expect(outcomes.at(-1)).toEqual({ rows: 7 });
    console.log(
      `ledger outage ${OUTAGE_MS} ms: ${during.length} statements tried during it, ${refused.length} refused with 57P03; ` +
        `after it came back REST answered 200 in ${restRecoveredMs} ms, the open proxy session in ${proxyRecoveredMs} ms`,
    );
    await Promise.all([session.end(), fresh.end()]);

    // Every row delivered is charged once, the windows held back by the outage included: nothing lost, nothing doubled.
    const delivered = outcomes.reduce((sum, o) => sum + costOfRows(rowsCharged(o), PRICE), 0n);
    const expected = FUNDED - delivered - costOfRows(restRows, PRICE);
    await waitFor(
      async () => {
        const state = await ledgerStateOf(ledger.adminUrl, wallet, providerId);
        return state.reservations === 0 && state.balanceMicro === expected;
      },
      20_000,
      "every charge to be written and every hold released",
    );
    const state = await ledgerStateOf(ledger.adminUrl, wallet, providerId);
    expect(state).toMatchObject({ chained: true, entriesSumMicro: expected, reservedMicro: 0n });
  }, 120_000);
});
