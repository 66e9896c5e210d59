import { randomBytes, randomUUID } from "node:crypto";
import { creditDeposit, type Queryable } from "../../src/billing/ledger.js";

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
