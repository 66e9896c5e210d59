import type { Queryable } from "../billing/ledger.js";

/** One EIP-3009 authorization: chain, token, payer and nonce name it on chain. */
export interface AuthorizationKey {
  chainId: number;
  asset: string;
  payer: string;
  nonce: string;
}

/**
 * Claims an authorization before it is settled: true for the one request (of any process) that may settle it,
 * false when it was claimed already (a replay, or the same payment sent several times at once).
 */
export async function claimAuthorization(
  db: Queryable,
  key: AuthorizationKey,
  providerId: string,
  amountMicro: bigint,
): Promise<boolean> {
  const { rowCount } = await db.query(
    `INSERT INTO x402_payments (chain_id, asset, payer, nonce, provider_id, amount_micro)
     VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING`,
    [...keyParams(key), providerId, amountMicro],
  );
  return rowCount === 1;
}

/** Whether the authorization was claimed already (settled, or being settled). */
export async function isClaimed(db: Queryable, key: AuthorizationKey): Promise<boolean> {
  const { rowCount } = await db.query(
    "SELECT 1 FROM x402_payments WHERE chain_id = $1 AND asset = $2 AND payer = $3 AND nonce = $4",
    keyParams(key),
  );
  return rowCount === 1;
}

/** Records the settlement transaction of a claimed authorization. */
export async function recordSettlement(db: Queryable, key: AuthorizationKey, txHash: string): Promise<void> {
  await db.query(
    "UPDATE x402_payments SET tx_hash = $5 WHERE chain_id = $1 AND asset = $2 AND payer = $3 AND nonce = $4",
    [...keyParams(key), txHash.toLowerCase()],
  );
}

/** Gives a claim back when its settlement failed before any transaction was sent: the agent may send it again. */
export async function releaseClaim(db: Queryable, key: AuthorizationKey): Promise<void> {
  await db.query(
    "DELETE FROM x402_payments WHERE chain_id = $1 AND asset = $2 AND payer = $3 AND nonce = $4 AND tx_hash IS NULL",
    keyParams(key),
  );
}

/** $1..$4 of every statement here; addresses and nonces are stored in lower case. */
function keyParams(key: AuthorizationKey): [number, string, string, string] {
  return [key.chainId, key.asset.toLowerCase(), key.payer.toLowerCase(), key.nonce.toLowerCase()];
}
