import { randomUUID } from "node:crypto";
import type pg from "pg";

/**
 * The ledger: balances, two-phase reservations and append-only entries, all in SQL so that the invariants of
 * DESIGN.md hold under any concurrency and across processes. Every function is a single SQL statement (one
 * round trip, one implicit transaction); the CHECK constraints of the `balances` table are the last word on
 * overdraft, and a violation surfaces as {@link InsufficientFundsError}.
 */
export type Queryable = Pick<pg.Pool, "query">;

export interface LedgerEntry {
  id: bigint;
  agentWallet: string;
  providerId: string;
  type: "deposit" | "query";
  amountMicro: bigint;
  balanceBeforeMicro: bigint;
  balanceAfterMicro: bigint;
  txHash: string | null;
  metadata: Record<string, unknown>;
  createdAt: Date;
}

export interface Reservation {
  id: string;
  agentWallet: string;
  providerId: string;
  amountMicro: bigint;
}

export interface BalanceRecord {
  balanceMicro: bigint;
  reservedMicro: bigint;
  updatedAt: Date | null;
}

/** SQLSTATEs after which a single-statement transaction can simply run again: it changed nothing. */
const RETRYABLE = new Set(["40P01" /* deadlock_detected */, "40001" /* serialization_failure */]);

/**
 * Runs one ledger statement, again if PostgreSQL chose it as a deadlock victim. Statements that touch a
 * reservation and its balance row can meet in opposite orders (a proxy session growing its reservation while
 * the group-committed batch with its earlier charges is written); each statement is its own transaction, so
 * a retry is exact.
 */
async function runStatement<R extends pg.QueryResultRow>(
  db: Queryable,
  text: string,
  values?: unknown[],
): Promise<pg.QueryResult<R>> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await db.query<R>(text, values);
    } catch (error) {
      if (attempt >= 8 || !RETRYABLE.has((error as { code?: string }).code ?? "")) throw error;
      await new Promise((resolve) => setTimeout(resolve, Math.random() * 2 ** attempt));
    }
  }
}

export class InsufficientFundsError extends Error {
  override name = "InsufficientFundsError";
}

const ENTRY_COLUMNS = `id, agent_wallet, provider_id, type, amount_micro, balance_before_micro, balance_after_micro,
  tx_hash, metadata, created_at`;

interface EntryRow {
  id: bigint;
  agent_wallet: string;
  provider_id: string;
  type: "deposit" | "query";
  amount_micro: bigint;
  balance_before_micro: bigint;
  balance_after_micro: bigint;
  tx_hash: string | null;
  metadata: Record<string, unknown>;
  created_at: Date;
}

function toEntry(row: EntryRow): LedgerEntry {
  return {
    id: row.id,
    agentWallet: row.agent_wallet,
    providerId: row.provider_id,
    type: row.type,
    amountMicro: row.amount_micro,
    balanceBeforeMicro: row.balance_before_micro,
    balanceAfterMicro: row.balance_after_micro,
    txHash: row.tx_hash,
    metadata: row.metadata,
    createdAt: row.created_at,
  };
}

function isOverdraft(error: unknown): boolean {
  const pgError = error as { code?: string; table?: string };
  return pgError.code === "23514" && pgError.table === "balances";
}

/**
 * Holds between `minMicro` and `maxMicro` of the agent's available balance (balance minus what other
 * reservations hold), as much as is available. Returns null when less than `minMicro` is available or the
 * agent has no balance with this provider. The hold expires after `ttlSeconds` if never settled or voided.
 */
export async function reserveFunds(
  db: Queryable,
  request: {
    agentWallet: string;
    providerId: string;
    minMicro: bigint;
    maxMicro: bigint;
    ttlSeconds: number;
  },
): Promise<Reservation | null> {
  const id = randomUUID();
  const { rows } = await runStatement<{ amount_micro: bigint }>(
    db,
    `WITH current AS (
       SELECT agent_wallet, provider_id, LEAST($4::bigint, balance_micro - reserved_micro) AS amount
         FROM balances
        WHERE agent_wallet = $1 AND provider_id = $2 AND balance_micro - reserved_micro >= $3::bigint
          FOR UPDATE),
     held AS (
       UPDATE balances b SET reserved_micro = b.reserved_micro + current.amount
         FROM current WHERE b.agent_wallet = current.agent_wallet AND b.provider_id = current.provider_id
       RETURNING current.amount)
     INSERT INTO reservations (id, agent_wallet, provider_id, amount_micro, expires_at)
     SELECT $5, $1, $2, amount, now() + make_interval(secs => $6) FROM held
     RETURNING amount_micro`,
    [request.agentWallet, request.providerId, request.minMicro, request.maxMicro, id, request.ttlSeconds],
  );
  const row = rows[0];
  if (!row) return null;
  return {
    id,
    agentWallet: request.agentWallet,
    providerId: request.providerId,
    amountMicro: row.amount_micro,
  };
}

/**
 * Adds between `minDeltaMicro` and `maxDeltaMicro` to a held reservation, as much as the agent's available
 * balance allows, and pushes its expiry out by `ttlSeconds`. Returns what was added: 0n (and nothing changed)
 * when less than `minDeltaMicro` is available or the reservation no longer exists.
 */
export async function extendReservation(
  db: Queryable,
  reservation: Reservation,
  minDeltaMicro: bigint,
  maxDeltaMicro: bigint,
  ttlSeconds = 300,
): Promise<bigint> {
  const { rows } = await runStatement<{ delta: bigint }>(
    db,
    `WITH current AS (
       SELECT b.agent_wallet, b.provider_id, LEAST($3::bigint, b.balance_micro - b.reserved_micro) AS delta
         FROM balances b JOIN reservations r ON r.agent_wallet = b.agent_wallet AND r.provider_id = b.provider_id
        WHERE r.id = $1 AND b.balance_micro - b.reserved_micro >= $2::bigint
          FOR UPDATE OF b),
     held AS (
       UPDATE balances b SET reserved_micro = b.reserved_micro + current.delta
         FROM current WHERE b.agent_wallet = current.agent_wallet AND b.provider_id = current.provider_id
       RETURNING current.delta)
     UPDATE reservations SET amount_micro = amount_micro + held.delta, expires_at = now() + make_interval(secs => $4)
       FROM held WHERE id = $1
     RETURNING held.delta`,
    [reservation.id, minDeltaMicro, maxDeltaMicro, ttlSeconds],
  );
  const delta = rows[0]?.delta ?? 0n;
  reservation.amountMicro += delta;
  return delta;
}

/**
 * Raises a held reservation to exactly `totalMicro` if the agent's available balance covers the difference.
 * Returns false (and changes nothing) when it does not, or when the reservation no longer exists.
 */
export async function growReservation(
  db: Queryable,
  reservation: Reservation,
  totalMicro: bigint,
): Promise<boolean> {
  const delta = totalMicro - reservation.amountMicro;
  if (delta <= 0n) return true;
  return (await extendReservation(db, reservation, delta, delta)) === delta;
}

/** One statement's charge against a held reservation. */
export interface ReservationCharge {
  reservationId: string;
  agentWallet: string;
  providerId: string;
  costMicro: bigint;
  metadata: Record<string, unknown>;
}

/**
 * Charges several statements against their (still held) reservations in one statement: each charge moves its
 * cost out of both the balance and the reservation and appends its own `query` entry, in the given order, with
 * balanceBefore/balanceAfter chained per agent and provider. Group commit for the wire proxy: many sessions'
 * charges cost one round trip. Charges of 0 are skipped. Returns the entries written; a charge whose
 * reservation no longer exists is returned in `missing` (its caller charges it without a reservation).
 */
export async function chargeReservations(
  db: Queryable,
  charges: readonly ReservationCharge[],
  ttlSeconds = 300,
): Promise<{ written: number; missing: ReservationCharge[] }> {
  const due = charges.filter((charge) => charge.costMicro > 0n);
  if (due.length === 0) return { written: 0, missing: [] };
  try {
    const { rows } = await runStatement<{ reservation_id: string }>(
      db,
      `WITH input AS (
         SELECT * FROM unnest($1::uuid[], $2::bigint[], $3::jsonb[]) WITH ORDINALITY AS t(reservation_id, cost, metadata, ord)),
       per_reservation AS (
         SELECT reservation_id, sum(cost)::bigint AS total FROM input GROUP BY reservation_id),
       drawn AS (
         UPDATE reservations r SET amount_micro = r.amount_micro - pr.total, expires_at = now() + make_interval(secs => $4)
           FROM per_reservation pr WHERE r.id = pr.reservation_id
         RETURNING r.id, r.agent_wallet, r.provider_id, pr.total),
       per_balance AS (
         SELECT agent_wallet, provider_id, sum(total)::bigint AS total FROM drawn GROUP BY agent_wallet, provider_id),
       charged AS (
         UPDATE balances b
            SET balance_micro = b.balance_micro - pb.total, reserved_micro = b.reserved_micro - pb.total, updated_at = now()
           FROM per_balance pb WHERE b.agent_wallet = pb.agent_wallet AND b.provider_id = pb.provider_id
         RETURNING b.agent_wallet, b.provider_id, b.balance_micro + pb.total AS before_micro),
       ordered AS (
         SELECT i.reservation_id, i.cost, i.metadata, i.ord, d.agent_wallet, d.provider_id, c.before_micro,
                sum(i.cost) OVER (PARTITION BY d.agent_wallet, d.provider_id ORDER BY i.ord)::bigint AS running
           FROM input i JOIN drawn d ON d.id = i.reservation_id
           JOIN charged c ON c.agent_wallet = d.agent_wallet AND c.provider_id = d.provider_id),
       entries AS (
         INSERT INTO ledger_entries (agent_wallet, provider_id, type, amount_micro, balance_before_micro,
                                     balance_after_micro, metadata)
         SELECT agent_wallet, provider_id, 'query', -cost, before_micro - running + cost, before_micro - running, metadata
           FROM ordered ORDER BY ord
         RETURNING 1)
       SELECT DISTINCT reservation_id::text FROM ordered, (SELECT count(*) FROM entries) written`,
      [due.map((c) => c.reservationId), due.map((c) => c.costMicro), due.map((c) => c.metadata), ttlSeconds],
    );
    const charged = new Set(rows.map((row) => row.reservation_id));
    const missing = due.filter((charge) => !charged.has(charge.reservationId));
    return { written: due.length - missing.length, missing };
  } catch (error) {
    if (isOverdraft(error))
      throw new InsufficientFundsError("a batched charge exceeds what its reservation holds");
    throw error;
  }
}

/**
 * Ends a reservation by charging `costMicro` (which may differ from what was held) and releasing the rest,
 * appending one `query` ledger entry with `metadata` when the cost is above zero. Throws
 * {@link InsufficientFundsError} when the cost exceeds what the agent can pay; nothing changes then.
 * A reservation that already expired is charged directly from the available balance.
 */
export async function settleReservation(
  db: Queryable,
  reservation: Reservation,
  costMicro: bigint,
  metadata: Record<string, unknown>,
): Promise<LedgerEntry | null> {
  try {
    const { rows } = await runStatement<EntryRow & { settled: boolean }>(
      db,
      `WITH released AS (
         DELETE FROM reservations WHERE id = $1 RETURNING agent_wallet, provider_id, amount_micro),
       charged AS (
         UPDATE balances b
            SET balance_micro = b.balance_micro - $2::bigint,
                reserved_micro = b.reserved_micro - released.amount_micro,
                updated_at = CASE WHEN $2::bigint > 0 THEN now() ELSE b.updated_at END
           FROM released
          WHERE b.agent_wallet = released.agent_wallet AND b.provider_id = released.provider_id
         RETURNING b.agent_wallet, b.provider_id, b.balance_micro),
       entry AS (
         INSERT INTO ledger_entries (agent_wallet, provider_id, type, amount_micro, balance_before_micro,
                                     balance_after_micro, metadata)
         SELECT agent_wallet, provider_id, 'query', -$2::bigint, balance_micro + $2::bigint, balance_micro, $3
           FROM charged WHERE $2::bigint > 0
         RETURNING ${ENTRY_COLUMNS})
       SELECT entry.*, EXISTS (SELECT 1 FROM released) AS settled FROM (SELECT 1) one LEFT JOIN entry ON true`,
      [reservation.id, costMicro, metadata],
    );
    const row = rows[0];
    if (row?.settled) return row.id === null ? null : toEntry(row);
  } catch (error) {
    if (isOverdraft(error)) throw new InsufficientFundsError("the balance does not cover this charge");
    throw error;
  }
  return chargeWithoutReservation(db, reservation, costMicro, metadata);
}

export async function chargeWithoutReservation(
  db: Queryable,
  target: { agentWallet: string; providerId: string },
  costMicro: bigint,
  metadata: Record<string, unknown>,
): Promise<LedgerEntry | null> {
  if (costMicro === 0n) return null;
  try {
    const { rows } = await runStatement<EntryRow>(
      db,
      `WITH charged AS (
         UPDATE balances SET balance_micro = balance_micro - $3::bigint, updated_at = now()
          WHERE agent_wallet = $1 AND provider_id = $2
         RETURNING agent_wallet, provider_id, balance_micro)
       INSERT INTO ledger_entries (agent_wallet, provider_id, type, amount_micro, balance_before_micro,
                                   balance_after_micro, metadata)
       SELECT agent_wallet, provider_id, 'query', -$3::bigint, balance_micro + $3::bigint, balance_micro, $4
         FROM charged
       RETURNING ${ENTRY_COLUMNS}`,
      [target.agentWallet, target.providerId, costMicro, metadata],
    );
    if (!rows[0]) throw new InsufficientFundsError("the agent has no balance with this provider");
    return toEntry(rows[0]);
  } catch (error) {
    if (isOverdraft(error)) throw new InsufficientFundsError("the balance does not cover this charge");
    throw error;
  }
}

/** Releases a reservation without charging anything. Safe to call twice. */
export async function voidReservation(db: Queryable, reservation: Reservation): Promise<void> {
  await runStatement(
    db,
    `WITH released AS (DELETE FROM reservations WHERE id = $1 RETURNING agent_wallet, provider_id, amount_micro)
     UPDATE balances b SET reserved_micro = b.reserved_micro - released.amount_micro
       FROM released WHERE b.agent_wallet = released.agent_wallet AND b.provider_id = released.provider_id`,
    [reservation.id],
  );
}

/** Releases every reservation past its expiry (left by a crashed process). Returns how many. */
export async function releaseExpiredReservations(db: Queryable): Promise<number> {
  const { rows } = await runStatement<{ released: number }>(
    db,
    `WITH expired AS (
       DELETE FROM reservations WHERE expires_at < now() RETURNING agent_wallet, provider_id, amount_micro),
     totals AS (
       SELECT agent_wallet, provider_id, sum(amount_micro)::bigint AS amount, count(*) AS n
         FROM expired GROUP BY agent_wallet, provider_id),
     released AS (
       UPDATE balances b SET reserved_micro = b.reserved_micro - totals.amount
         FROM totals WHERE b.agent_wallet = totals.agent_wallet AND b.provider_id = totals.provider_id
       RETURNING totals.n)
     SELECT coalesce(sum(n), 0)::int AS released FROM released`,
  );
  return rows[0]?.released ?? 0;
}

export interface DepositCredit {
  chainId: number;
  txHash: string;
  agentWallet: string;
  providerId: string;
  amountMicro: bigint;
  blockNumber: bigint;
}

/**
 * Credits a verified deposit: records (chainId, txHash), raises the balance and appends a `deposit` entry,
 * all in one statement. Returns null when that transaction was already credited (the primary key of
 * `deposits` decides, however many requests race).
 */
export async function creditDeposit(db: Queryable, deposit: DepositCredit): Promise<LedgerEntry | null> {
  const { rows } = await runStatement<EntryRow>(
    db,
    `WITH recorded AS (
       INSERT INTO deposits (chain_id, tx_hash, agent_wallet, provider_id, amount_micro, block_number)
       VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING
       RETURNING agent_wallet, provider_id, amount_micro, tx_hash),
     credited AS (
       INSERT INTO balances AS b (agent_wallet, provider_id, balance_micro)
       SELECT agent_wallet, provider_id, amount_micro FROM recorded
       ON CONFLICT (agent_wallet, provider_id)
         DO UPDATE SET balance_micro = b.balance_micro + excluded.balance_micro, updated_at = now()
       RETURNING b.balance_micro)
     INSERT INTO ledger_entries (agent_wallet, provider_id, type, amount_micro, balance_before_micro,
                                 balance_after_micro, tx_hash, metadata)
     SELECT recorded.agent_wallet, recorded.provider_id, 'deposit', recorded.amount_micro,
            credited.balance_micro - recorded.amount_micro, credited.balance_micro, recorded.tx_hash,
            jsonb_build_object('chainId', $1::int, 'blockNumber', $6::text)
       FROM recorded, credited
     RETURNING ${ENTRY_COLUMNS}`,
    [
      deposit.chainId,
      deposit.txHash,
      deposit.agentWallet,
      deposit.providerId,
      deposit.amountMicro,
      deposit.blockNumber,
    ],
  );
  return rows[0] ? toEntry(rows[0]) : null;
}

/** The agent's balance with a provider; zero with `updatedAt` null when it never had one. */
export async function getBalance(
  db: Queryable,
  agentWallet: string,
  providerId: string,
): Promise<BalanceRecord> {
  const { rows } = await runStatement<{ balance_micro: bigint; reserved_micro: bigint; updated_at: Date }>(
    db,
    "SELECT balance_micro, reserved_micro, updated_at FROM balances WHERE agent_wallet = $1 AND provider_id = $2",
    [agentWallet, providerId],
  );
  const row = rows[0];
  if (!row) return { balanceMicro: 0n, reservedMicro: 0n, updatedAt: null };
  return { balanceMicro: row.balance_micro, reservedMicro: row.reserved_micro, updatedAt: row.updated_at };
}

/** The agent's ledger entries, newest first, optionally for one provider. */
export async function listLedgerEntries(
  db: Queryable,
  agentWallet: string,
  options: { providerId?: string; limit: number },
): Promise<LedgerEntry[]> {
  const { rows } = await runStatement<EntryRow>(
    db,
    `SELECT ${ENTRY_COLUMNS} FROM ledger_entries
      WHERE agent_wallet = $1 AND ($2::uuid IS NULL OR provider_id = $2::uuid)
      ORDER BY id DESC LIMIT $3`,
    [agentWallet, options.providerId ?? null, options.limit],
  );
  return rows.map(toEntry);
}
