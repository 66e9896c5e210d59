import pg from "pg";
import { generatePrivateKey, privateKeyToAddress } from "viem/accounts";
import { describe, expect, it } from "vitest";
import { costOfRows, priceOf } from "../../src/billing/cost.js";
import { createAgentToken } from "../../src/proxy/agent-token.js";
import {
  creditAgent,
  ledgerStateOf,
  registerProviderOver,
  useProcessesOnOneLedger,
} from "../support/pgtoll-process.js";

/** 1 USDC per 1000 rows with a markup of 1.5: 1500 micro-USDC a row. */
const PRICE = priceOf({ priceMicroPer1000Rows: 1_000_000n, markupPpm: 1_500_000n });
const SESSIONS = 200;
const STATEMENTS_PER_SESSION = 6;
/** Less than the sessions would spend: some statements are cut off or refused, and the balance must not go below 0. */
const FUNDED = 20_000_000n;

const fleet = useProcessesOnOneLedger(2, {
  PGTOLL_PROXY_UPSTREAM_LIMIT: "30",
  PGTOLL_PROXY_QUEUE_TIMEOUT_MS: "60000",
});
const { processes } = fleet;

/** Rows each statement delivered (a cut-off statement: those before the cut), and how its session fared. */
async function runSession(port: number, key: `0x${string}`, wallet: string, providerId: string) {
  const delivered: number[] = [];
  const client = new pg.Client({
    host: "127.0.0.1",
    port,
    user: wallet,
    database: providerId,
    password: await createAgentToken(key, providerId),
  });
  // A session of the process killed below loses its connection between statements too: the next query (or
  // end) reports it; unlistened, the client's 'error' event would be an uncaught exception.
  client.on("error", () => {});
  try {
    await client.connect();
  } catch (error) {
    // What other sessions hold leaves less than a row available: no session is opened, nothing runs.
    if ((error as { code?: string }).code !== "PT402") throw error;
    return Array.from({ length: STATEMENTS_PER_SESSION }, () => 0);
  }
  try {
    for (let i = 0; i < STATEMENTS_PER_SESSION; i++) {
      const rows = 1 + Math.floor(Math.random() * 100);
      try {
        delivered.push((await client.query(`SELECT id, name FROM items WHERE id <= ${rows}`)).rowCount ?? 0);
      } catch (error) {
        const { code, message } = error as { code?: string; message: string };
        if (code !== "PT402") throw error;
        // "the result was cut off after N rows, which were charged", or refused before it ran.
        delivered.push(Number(/cut off after (\d+) rows/.exec(message)?.[1] ?? 0));
      }
    }
  } finally {
    await client.end();
  }
  return delivered;
}

describe("one agent, 200 sessions over two pgtoll processes on one ledger", () => {
  it("charges every statement exactly by the cost rule and never takes the balance below zero", async () => {
    const providerId = await registerProviderOver(processes[0]!.httpUrl, fleet.providerUrl, {
      basePricePer1000Rows: 1,
      markupMultiplier: 1.5,
    });
    const key = generatePrivateKey();
    const wallet = privateKeyToAddress(key).toLowerCase();
    await creditAgent(fleet.ledgerUrl, wallet, providerId, FUNDED);

    const results = await Promise.all(
      Array.from({ length: SESSIONS }, (_, i) =>
        runSession(processes[i % 2]!.proxyPort, key, wallet, providerId),
      ),
    );
    const statements = results.flat();
    const expected = statements.reduce((sum, rows) => sum + costOfRows(rows, PRICE), 0n);
    const demanded = statements.length;
    expect(demanded).toBe(SESSIONS * STATEMENTS_PER_SESSION);

    // Sessions are closed: every window is written and every hold given back (each process waits for them).
    let state = await ledgerStateOf(fleet.ledgerUrl, wallet, providerId);
    for (let tries = 0; tries < 100 && (state.reservations > 0 || state.reservedMicro > 0n); tries++) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      state = await ledgerStateOf(fleet.ledgerUrl, wallet, providerId);
    }
    expect(state).toMatchObject({ reservations: 0, reservedMicro: 0n, chained: true });
    expect(state.entriesSumMicro).toBe(state.balanceMicro);
    expect(state.balanceMicro).toBeGreaterThanOrEqual(0n);
    expect(FUNDED - state.balanceMicro).toBe(expected);
    // The balance ran out: some statements were cut off or refused, as intended.
    expect(statements.some((rows) => rows === 0)).toBe(true);

    // One process dies with sessions open on both: the other goes on serving, the ledger stays consistent.
    // The dead process's holds keep their funds until the reservation TTL, so the survivors get ample funds.
    await creditAgent(fleet.ledgerUrl, wallet, providerId, 10n * FUNDED);
    const survivors = Array.from({ length: 10 }, () =>
      runSession(processes[0]!.proxyPort, key, wallet, providerId),
    );
    const doomed = Array.from({ length: 10 }, () =>
      runSession(processes[1]!.proxyPort, key, wallet, providerId).catch(() => []),
    );
    await new Promise((resolve) => setTimeout(resolve, 100));
    await processes[1]!.kill();
    const served = (await Promise.all(survivors)).flat();
    await Promise.all(doomed);
    expect(served).toHaveLength(10 * STATEMENTS_PER_SESSION);
    expect(served.every((rows) => rows > 0)).toBe(true);
    const after = await ledgerStateOf(fleet.ledgerUrl, wallet, providerId);
    expect(after).toMatchObject({ chained: true, entriesSumMicro: after.balanceMicro });
  }, 180_000);
});
