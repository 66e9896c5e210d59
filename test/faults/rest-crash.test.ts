import { randomBytes } from "node:crypto";
import { mkdtemp, readFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import type { Hex } from "viem";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { costOfRows, priceOf } from "../../src/billing/cost.js";
import { parseMicro } from "../../src/billing/money.js";
import {
  deployTestToken,
  type LocalChain,
  mintTokens,
  startLocalChain,
  type TestToken,
  transferTokens,
} from "../../src/devchain/index.js";
import { createMetadataDatabase, type TestDatabase } from "../support/database.js";
import { createProviderDatabase } from "../support/gateway.js";
import {
  ledgerStateOf,
  type PgtollProcess,
  registerProviderOver,
  startPgtollProcess,
} from "../support/pgtoll-process.js";
import { waitFor } from "../support/real-clients.js";

/** 1 USDC per 1000 rows: a row costs 1000 micro-USDC. */
const PRICE = priceOf({ priceMicroPer1000Rows: 1_000_000n, markupPpm: 1_000_000n });
const DEPOSITS = 12;
const DEPOSIT_MICRO = 5_000_000n;

let chain: LocalChain;
let token: TestToken;
let agentKey: Hex;
let agent: string;
let meta: { db: TestDatabase; close(): Promise<void> };
let providerDb: TestDatabase;
const running: PgtollProcess[] = [];

beforeAll(async () => {
  chain = await startLocalChain();
  const [deployer, agentAccount] = chain.accounts;
  agentKey = agentAccount!.privateKey;
  agent = agentAccount!.address.toLowerCase();
  token = await deployTestToken(chain, deployer!.privateKey);
  await mintTokens(chain, deployer!.privateKey, token, agent as Hex, 1_000_000_000n);
  meta = await createMetadataDatabase();
  providerDb = await createProviderDatabase(100);
}, 120_000);
afterAll(async () => {
  await Promise.all(running.map((process) => process.kill()));
  await providerDb?.drop();
  await meta?.close();
  await chain?.stop();
});

/**
 * The URL of the ledger database of a pgtoll on the embedded default: the cluster's credentials and the port of
 * the postmaster running in the data directory (a new one at each start).
 */
async function embeddedLedgerUrl(dataDir: string): Promise<string> {
  const { user, password } = JSON.parse(await readFile(join(dataDir, "credentials.json"), "utf8")) as {
    user: string;
    password: string;
  };
  const port = (await readFile(join(dataDir, "postgres", "postmaster.pid"), "utf8")).split("\n")[3]?.trim();
  return `postgres://${user}:${encodeURIComponent(password)}@127.0.0.1:${port}/pgtoll`;
}

describe.each([
  ["on DATABASE_URL", false],
  ["on the embedded default (its PostgreSQL left running, as after the OOM killer)", true],
])("pgtoll killed with SIGKILL under REST queries and deposits, %s", (_mode, embedded) => {
  it("keeps every acknowledged charge and deposit; an unanswered deposit is credited once when retried", async () => {
    const dataDir = await mkdtemp(join(tmpdir(), "pgtoll-rest-crash-"));
    const env = {
      PGTOLL_RPC_URL: chain.rpcUrl,
      PGTOLL_TOKEN_ADDRESS: token.address,
      PGTOLL_MIN_CONFIRMATIONS: "1",
    };
    const databaseUrl = embedded ? "" : meta.db.url;
    const ledgerUrl = () => (embedded ? embeddedLedgerUrl(dataDir) : Promise.resolve(meta.db.url));
    const first = await startPgtollProcess(databaseUrl, env, dataDir);
    running.push(first);
    const providerWallet = `0x${randomBytes(20).toString("hex")}`;
    const providerId = await registerProviderOver(
      first.httpUrl,
      providerDb.url,
      { basePricePer1000Rows: 1, markupMultiplier: 1 },
      providerWallet,
    );
    const transfers: Hex[] = [];
    for (let i = 0; i < DEPOSITS; i++)
      transfers.push(await transferTokens(chain, agentKey, token, providerWallet as Hex, DEPOSIT_MICRO));
    const post = (httpUrl: string, path: string, body: unknown) =>
      fetch(`${httpUrl}${path}`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(body),
      });
    // The first deposit funds the queries.
    expect(
      (await post(first.httpUrl, "/api/deposit", { txHash: transfers[0], agentWallet: agent, providerId }))
        .status,
    ).toBe(200);

    const acknowledged = { deposits: new Set<Hex>([transfers[0]!]), chargedMicro: 0n, queries: 0 };
    let stop = false;
    const queries = Array.from({ length: 8 }, async () => {
      while (!stop) {
        const rows = 1 + Math.floor(Math.random() * 20);
        const response = await post(first.httpUrl, "/api/query", {
          sql: `SELECT id FROM items WHERE id <= ${rows}`,
          agentWallet: agent,
          providerId,
        }).catch(() => null);
        if (!response) return;
        if (response.status === 200) {
          const { actualCost } = (await response.json()) as { actualCost: string };
          acknowledged.chargedMicro += parseMicro(actualCost) ?? 0n;
          acknowledged.queries++;
        }
      }
    });
    const deposits = transfers.slice(1).map(async (txHash, i) => {
      await new Promise((resolve) => setTimeout(resolve, 100 * i));
      const response = await post(first.httpUrl, "/api/deposit", {
        txHash,
        agentWallet: agent,
        providerId,
      }).catch(() => null);
      if (response?.status === 200) acknowledged.deposits.add(txHash);
    });
    // Killed under load: once queries are being answered (a loaded machine takes a while to answer the first).
    await new Promise((resolve) => setTimeout(resolve, 700));
    await waitFor(() => acknowledged.queries >= 3, 20_000, "queries to be answered before the kill");
    await first.kill();
    stop = true;
    await Promise.all([...queries, ...deposits]);

    // On the embedded default the dead process's PostgreSQL still runs: the ledger is read from it.
    const db = new pg.Client({ connectionString: await ledgerUrl() });
    await db.connect();
    const credited = new Set(
      (await db.query("SELECT tx_hash FROM deposits")).rows.map((row: { tx_hash: string }) => row.tx_hash),
    );
    const restCharged = BigInt(
      (
        await db.query(
          "SELECT coalesce(-sum(amount_micro), 0)::text AS total FROM ledger_entries WHERE type = 'query' AND metadata->>'source' = 'rest'",
        )
      ).rows[0].total,
    );
    await db.end();
    console.log(
      `SIGKILL under REST load (${embedded ? "embedded" : "DATABASE_URL"}): ${acknowledged.queries} queries and ${acknowledged.deposits.size} deposits acknowledged; ` +
        `${restCharged} micro-USDC of REST charges in the ledger for ${acknowledged.chargedMicro} acknowledged`,
    );
    expect(acknowledged.queries).toBeGreaterThan(0);
    for (const txHash of acknowledged.deposits) expect(credited.has(txHash)).toBe(true);
    // Every acknowledged charge is durable; at most the 8 requests in flight were charged and not answered.
    expect(restCharged).toBeGreaterThanOrEqual(acknowledged.chargedMicro);
    expect(restCharged - acknowledged.chargedMicro).toBeLessThanOrEqual(8n * costOfRows(20, PRICE));

    // After a restart every deposit can be retried: credited once (200 now, or 409 if it already was).
    const second = await startPgtollProcess(databaseUrl, env, dataDir);
    running.push(second);
    for (const txHash of transfers.slice(1)) {
      const retried = await post(second.httpUrl, "/api/deposit", { txHash, agentWallet: agent, providerId });
      expect(retried.status).toBe(credited.has(txHash) ? 409 : 200);
    }
    const state = await ledgerStateOf(await ledgerUrl(), agent, providerId);
    expect(state).toMatchObject({ chained: true, entriesSumMicro: state.balanceMicro });
    const depositsTotal = BigInt(DEPOSITS) * DEPOSIT_MICRO;
    expect(state.balanceMicro).toBe(depositsTotal - restCharged);
    expect(await second.stop()).toBe(0);
  }, 150_000);
});
