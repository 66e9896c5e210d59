import pg from "pg";
import { generatePrivateKey, privateKeyToAddress } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { costOfRows, priceOf } from "../../src/billing/cost.js";
import { createAgentToken } from "../../src/proxy/agent-token.js";
import { createMetadataDatabase, type TestDatabase } from "../support/database.js";
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
const SESSIONS = 20;
// Far more than 20 busy sessions spend in the test, with room for their holds: a restarted process must find funds
// that the dead one does not hold.
const FUNDED = 100_000_000_000n;
/** PGTOLL_WINDOW_MAX_COST of the run: 0.2 USDC, about eight statements of a session. */
const WINDOW_MAX_COST_MICRO = 200_000n;
/**
 * What a crash may leave uncharged: per session, the window being written and the open one, each at most the
 * bound plus the statement that reached it (a read here is at most 50 rows).
 */
const EXPOSURE_BOUND_MICRO = BigInt(SESSIONS) * 2n * (WINDOW_MAX_COST_MICRO + costOfRows(50, PRICE));
const ENV = {
  PGTOLL_WINDOW_MAX_COST: "0.2",
  PGTOLL_RESERVATION_TTL_S: "30",
  PGTOLL_PROXY_UPSTREAM_LIMIT: "40",
};

let meta: { db: TestDatabase; close(): Promise<void> };
let providerDb: TestDatabase;
const running: PgtollProcess[] = [];

beforeAll(async () => {
  meta = await createMetadataDatabase();
  providerDb = await createProviderDatabase(100);
});
afterAll(async () => {
  await Promise.all(running.map((process) => process.kill()));
  await providerDb?.drop();
  await meta?.close();
});

interface SessionTally {
  /** Cost, by the cost rule, of every statement whose whole result the client received. */
  receivedMicro: bigint;
  /** Cost of the statement that was running when pgtoll died: its rows may have been sent, not all read. */
  inFlightMicro: bigint;
  statements: number;
}

/** An agent session through the proxy, connected. */
async function connectSession(port: number, key: `0x${string}`, wallet: string, providerId: string) {
  const client = new pg.Client({
    host: "127.0.0.1",
    port,
    user: wallet,
    database: providerId,
    password: await createAgentToken(key, providerId),
  });
  client.on("error", () => {});
  await client.connect();
  return client;
}

/** Runs reads of 1 to 50 rows back to back until the connection dies. */
async function readUntilKilled(client: pg.Client): Promise<SessionTally> {
  const tally: SessionTally = { receivedMicro: 0n, inFlightMicro: 0n, statements: 0 };
  for (;;) {
    const rows = 1 + Math.floor(Math.random() * 50);
    tally.inFlightMicro = costOfRows(rows, PRICE);
    try {
      const result = await client.query(`SELECT id FROM items WHERE id <= ${rows}`);
      tally.receivedMicro += costOfRows(result.rowCount ?? 0, PRICE);
      tally.statements++;
    } catch {
      return tally;
    }
  }
}

describe("pgtoll killed with SIGKILL under proxy load", () => {
  it("loses at most the unwritten windows, only in the agent's favour, and is consistent after a restart", async () => {
    const first = await startPgtollProcess(meta.db.url, ENV);
    running.push(first);
    const providerId = await registerProviderOver(first.httpUrl, providerDb.url, {
      basePricePer1000Rows: 1,
      markupMultiplier: 1,
    });
    const key = generatePrivateKey();
    const wallet = privateKeyToAddress(key).toLowerCase();
    await creditAgent(meta.db.url, wallet, providerId, FUNDED);

    const clients = await Promise.all(
      Array.from({ length: SESSIONS }, () => connectSession(first.proxyPort, key, wallet, providerId)),
    );
    const sessions = clients.map(readUntilKilled);
    await new Promise((resolve) => setTimeout(resolve, 2000));
    await first.kill();
    const tallies = await Promise.all(sessions);

    const received = tallies.reduce((sum, t) => sum + t.receivedMicro, 0n);
    const inFlight = tallies.reduce((sum, t) => sum + t.inFlightMicro, 0n);
    const statements = tallies.reduce((sum, t) => sum + t.statements, 0);
    const crashed = await ledgerStateOf(meta.db.url, wallet, providerId);
    const charged = FUNDED - crashed.balanceMicro;
    const lost = received - charged;
    console.log(
      `SIGKILL under proxy load: ${SESSIONS} sessions, ${statements} statements received, ` +
        `${received} micro-USDC of results received, ${charged} charged, ${lost} left uncharged ` +
        `(bound ${EXPOSURE_BOUND_MICRO}), ${crashed.queryEntries} entries`,
    );
    expect(statements).toBeGreaterThan(SESSIONS * 5);
    // Never an overcharge: at most what was received, plus the statements cut short by the crash.
    expect(charged).toBeLessThanOrEqual(received + inFlight);
    // What a crash can leave uncharged: per session the open window and the one being written.
    expect(lost).toBeLessThanOrEqual(EXPOSURE_BOUND_MICRO);
    // Windows were written while the sessions ran: far fewer entries than statements, but some.
    expect(crashed.queryEntries).toBeGreaterThan(0);
    expect(crashed.queryEntries).toBeLessThan(statements);
    expect(crashed).toMatchObject({ chained: true, entriesSumMicro: crashed.balanceMicro });

    // The restarted process releases what the dead one held once the holds expire, and serves at once.
    const second = await startPgtollProcess(meta.db.url, ENV);
    running.push(second);
    const client = await connectSession(second.proxyPort, key, wallet, providerId);
    expect((await client.query("SELECT id FROM items WHERE id <= 7")).rowCount).toBe(7);
    await client.end();
    const started = Date.now();
    await waitFor(
      async () => {
        const state = await ledgerStateOf(meta.db.url, wallet, providerId);
        return state.reservations === 0 && state.reservedMicro === 0n;
      },
      75_000,
      "the dead process's reservations to expire",
    );
    const recovered = await ledgerStateOf(meta.db.url, wallet, providerId);
    console.log(`reservations released ${Math.round((Date.now() - started) / 1000)} s after the restart`);
    expect(recovered).toMatchObject({
      chained: true,
      entriesSumMicro: recovered.balanceMicro,
      reservedMicro: 0n,
    });
    expect(recovered.balanceMicro).toBe(crashed.balanceMicro - costOfRows(7, PRICE));
    expect(await second.stop()).toBe(0);
  }, 150_000);
});
