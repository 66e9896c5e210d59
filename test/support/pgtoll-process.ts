import { randomBytes } from "node:crypto";
import { mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { afterAll, beforeAll } from "vitest";
import { creditDeposit } from "../../src/billing/ledger.js";
import { type CliProcess, runCli } from "./cli.js";
import { createMetadataDatabase } from "./database.js";
import { createProviderDatabase } from "./gateway.js";

/** `pgtoll start` as a child process on a given ledger database, as operators run it. */
export interface PgtollProcess {
  cli: CliProcess;
  httpUrl: string;
  proxyPort: number;
  /** As the OOM killer would: no chance to write or release anything. */
  kill(): Promise<void>;
  /** SIGTERM and wait for the exit code. */
  stop(): Promise<number | null>;
}

/** One secret key for every process of a test run: they must read each other's encrypted provider URLs. */
export const SHARED_SECRET_KEY = randomBytes(32).toString("hex");

/**
 * Starts `pgtoll start` on `databaseUrl` with a data directory of its own (`dataDir`, or a new temporary one:
 * a data directory is locked by one process). A restart on the same state passes the same `dataDir`.
 */
export async function startPgtollProcess(
  databaseUrl: string,
  env: Record<string, string> = {},
  dataDir?: string,
): Promise<PgtollProcess> {
  const cli = runCli(["start"], {
    DATABASE_URL: databaseUrl,
    PGTOLL_DATA_DIR: dataDir ?? (await mkdtemp(join(tmpdir(), "pgtoll-process-"))),
    PGTOLL_HTTP_PORT: "0",
    PGTOLL_SECRET_KEY: SHARED_SECRET_KEY,
    PGTOLL_RATE_LIMIT: "off",
    // Test provider databases are on the test cluster, on loopback, which `pgtoll start` refuses by default.
    PGTOLL_PROVIDER_HOSTS: "any",
    ...env,
  });
  const ready = await cli.waitFor(/^pgtoll ready/);
  const [, httpUrl = "", proxyUrl = ""] = /^pgtoll ready (\S+) (\S+)/.exec(ready) ?? [];
  return {
    cli,
    httpUrl,
    proxyPort: Number(new URL(proxyUrl).port),
    async kill() {
      cli.child.kill("SIGKILL");
      await cli.exited;
    },
    async stop() {
      cli.child.kill("SIGTERM");
      return cli.exited;
    },
  };
}

/** Several pgtoll processes on one ledger database, over one provider database, as a test file's fixture. */
export interface ProcessesOnOneLedger {
  /** The ledger database, which every process uses (DATABASE_URL). */
  readonly ledgerUrl: string;
  /** A provider database of `items` rows, for `registerProviderOver`. */
  readonly providerUrl: string;
  readonly processes: readonly PgtollProcess[];
}

/**
 * Starts `count` processes (`pgtoll start` with `env`) on a new ledger database, and a provider database of
 * `items` rows, before the file's tests; kills the processes and drops both databases after them.
 */
export function useProcessesOnOneLedger(
  count: number,
  env: Record<string, string>,
  items = 100,
): ProcessesOnOneLedger {
  let meta: Awaited<ReturnType<typeof createMetadataDatabase>> | undefined;
  let provider: Awaited<ReturnType<typeof createProviderDatabase>> | undefined;
  const processes: PgtollProcess[] = [];
  beforeAll(async () => {
    meta = await createMetadataDatabase();
    provider = await createProviderDatabase(items);
    const url = meta.db.url;
    processes.push(...(await Promise.all(Array.from({ length: count }, () => startPgtollProcess(url, env)))));
  }, 120_000);
  afterAll(async () => {
    await Promise.all(processes.map((process) => process.kill()));
    await provider?.drop();
    await meta?.close();
  });
  const ready = () => {
    if (!meta || !provider) throw new Error("the processes are started in beforeAll: use them in a test");
    return { meta, provider };
  };
  return {
    get ledgerUrl() {
      return ready().meta.db.url;
    },
    get providerUrl() {
      return ready().provider.url;
    },
    processes,
  };
}

async function postJson(url: string, body: unknown, headers: Record<string, string> = {}) {
  const response = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify(body),
  });
  const json = (await response.json()) as Record<string, unknown>;
  if (!response.ok) throw new Error(`${url}: ${response.status} ${JSON.stringify(json)}`);
  return json;
}

/** Registers and prices a provider through the HTTP API of a running pgtoll. */
export async function registerProviderOver(
  httpUrl: string,
  connectionString: string,
  pricing: { basePricePer1000Rows: number; markupMultiplier: number },
  walletAddress = `0x${randomBytes(20).toString("hex")}`,
): Promise<string> {
  const registered = await postJson(`${httpUrl}/api/providers/register`, {
    name: "Test data",
    email: `${randomBytes(6).toString("hex")}@example.com`,
    walletAddress,
    connectionString,
  });
  const { provider, apiKey } = registered as { provider: { id: string }; apiKey: string };
  await postJson(`${httpUrl}/api/providers/${provider.id}/pricing`, pricing, { "x-api-key": apiKey });
  return provider.id;
}

/** Credits `amountMicro` to `wallet` with the provider, as a verified deposit would. */
export async function creditAgent(
  databaseUrl: string,
  wallet: string,
  providerId: string,
  amountMicro: bigint,
): Promise<void> {
  const db = new pg.Client({ connectionString: databaseUrl });
  await db.connect();
  try {
    await creditDeposit(db, {
      chainId: 8453,
      txHash: `0x${randomBytes(32).toString("hex")}`,
      agentWallet: wallet,
      providerId,
      amountMicro,
      blockNumber: 1n,
    });
  } finally {
    await db.end();
  }
}

export interface LedgerState {
  balanceMicro: bigint;
  reservedMicro: bigint;
  reservations: number;
  /** Sum of the agent's reservations: equals `reservedMicro` when the ledger is consistent. */
  heldMicro: bigint;
  /** Sum of the agent's entries: equals the balance when the ledger is consistent. */
  entriesSumMicro: bigint;
  /** Every entry's balance before equals the previous entry's balance after. */
  chained: boolean;
  queryEntries: number;
}

/** The agent's balance, holds and entries, read directly from the ledger database. */
export async function ledgerStateOf(
  databaseUrl: string,
  wallet: string,
  providerId: string,
): Promise<LedgerState> {
  const db = new pg.Client({ connectionString: databaseUrl });
  await db.connect();
  try {
    // One snapshot: charges other processes are still writing must not fall between the balance and the entries.
    await db.query("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY");
    const balance = await db.query(
      "SELECT balance_micro::text, reserved_micro::text FROM balances WHERE agent_wallet = $1 AND provider_id = $2",
      [wallet, providerId],
    );
    const held = await db.query(
      "SELECT count(*)::int AS n, coalesce(sum(amount_micro), 0)::text AS held FROM reservations WHERE agent_wallet = $1 AND provider_id = $2",
      [wallet, providerId],
    );
    const entries = await db.query(
      `SELECT type, amount_micro::text, balance_before_micro::text, balance_after_micro::text FROM ledger_entries
        WHERE agent_wallet = $1 AND provider_id = $2 ORDER BY id`,
      [wallet, providerId],
    );
    let chained = true;
    for (let i = 1; i < entries.rows.length; i++)
      if (entries.rows[i].balance_before_micro !== entries.rows[i - 1].balance_after_micro) chained = false;
    return {
      balanceMicro: BigInt(balance.rows[0]?.balance_micro ?? 0),
      reservedMicro: BigInt(balance.rows[0]?.reserved_micro ?? 0),
      reservations: held.rows[0].n,
      heldMicro: BigInt(held.rows[0].held),
      entriesSumMicro: entries.rows.reduce((sum, row) => sum + BigInt(row.amount_micro), 0n),
      chained,
      queryEntries: entries.rows.filter((row) => row.type === "query").length,
    };
  } finally {
    await db.query("COMMIT").catch(() => {});
    await db.end();
  }
}
