import { randomBytes, randomUUID } from "node:crypto";
import type pg from "pg";
import { afterAll, beforeAll } from "vitest";
import { creditDeposit, type Queryable } from "../../src/billing/ledger.js";
import { createMetadataDatabase, type TestDatabase } from "./database.js";

export function randomWallet(): `0x${string}` {
  return `0x${randomBytes(20).toString("hex")}`;
}

export function randomTxHash(): `0x${string}` {
  return `0x${randomBytes(32).toString("hex")}`;
}

/** Inserts a bare provider row (no real upstream) for ledger-level tests. */
export async function insertProvider(db: Queryable): Promise<string> {
  const id = randomUUID();
  await db.query(
    `INSERT INTO providers (id, name, email, wallet_address, connection_secret, api_key_hash)
     VALUES ($1, 'p', $2, $3, 'x', '\\x00')`,
    [id, `${id}@example.com`, randomWallet()],
  );
  return id;
}

/** Credits `amountMicro` to a wallet's balance with the provider by a deposit entry (no chain involved). */
export async function depositFor(
  db: Queryable,
  providerId: string,
  amountMicro: bigint,
  agentWallet: string = randomWallet(),
): Promise<string> {
  await creditDeposit(db, {
    chainId: 8453,
    txHash: randomTxHash(),
    agentWallet,
    providerId,
    amountMicro,
    blockNumber: 1n,
  });
  return agentWallet;
}

/** What {@link useLedgerDatabase} gives a test file. */
export interface LedgerDatabase {
  readonly pool: pg.Pool;
  readonly db: TestDatabase;
  /** A bare provider row (see {@link insertProvider}). */
  readonly providerId: string;
}

/**
 * A migrated metadata database with one provider, made before the file's tests and dropped after them. Its
 * fields are set by the `beforeAll` this registers: read them in tests and hooks, not at the top of the file.
 */
export function useLedgerDatabase(): LedgerDatabase {
  let meta: Awaited<ReturnType<typeof createMetadataDatabase>> | undefined;
  let providerId: string | undefined;
  beforeAll(async () => {
    meta = await createMetadataDatabase();
    providerId = await insertProvider(meta.pool);
  });
  afterAll(async () => meta?.close());
  const ready = () => {
    if (!meta || !providerId) throw new Error("the ledger database is made in beforeAll: read it in a test");
    return { meta, providerId };
  };
  return {
    get pool() {
      return ready().meta.pool;
    },
    get db() {
      return ready().meta.db;
    },
    get providerId() {
      return ready().providerId;
    },
  };
}
