import { randomUUID } from "node:crypto";
import { SqlState } from "../db/sql-state.js";
import { AVAILABLE, spendToday } from "./daily-limits.js";
import { ledgerStatement, type Queryable, runStatement } from "./ledger-statement.js";

export type { Queryable } from "./ledger-statement.js";

/**
 * The ledger: balances, two-phase reservations and append-only entries, all in SQL so that the invariants of
 * DESIGN.md hold under any concurrency and across processes. Every function is a single SQL statement (one
 * round trip, one implicit transaction, planned once per connection); the CHECK constraints of the `balances`
 * table are the last word on overdraft, and a violation surfaces as {@link InsufficientFundsError}.
 */
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
  return pgError.code === SqlState.checkViolation && pgError.table === "balances";
}

/**
 * How much a hold takes from an (agent, provider) balance row `b`: between $min and $max, as much as is available,
 * and above $fair at most a quarter of what is available. Written into both `reserved_micro` and
 * `last_hold_micro` by one UPDATE, so that it is computed from the row version the update writes (PostgreSQL
 * re-evaluates an UPDATE's SET list on the newest version of a concurrently updated row; a value computed by an
 * earlier locking read in the same statement is not) and returned through `last_hold_micro`.
 */
function holdAmount(min: string, max: string, fair: string): string {
  return `LEAST(${max}::bigint, ${AVAILABLE}, GREATEST(${min}::bigint, ${fair}::bigint, ${AVAILABLE} / 4))`;
}

const RESERVE = ledgerStatement(
  "reserve",
  `WITH held AS (
       UPDATE balances b
          SET reserved_micro = b.reserved_micro + ${holdAmount("$3", "$4", "$7")},
              last_hold_micro = ${holdAmount("$3", "$4", "$7")}
        WHERE b.agent_wallet = $1 AND b.provider_id = $2 AND ${AVAILABLE} >= $3::bigint
       RETURNING b.last_hold_micro AS amount)
     INSERT INTO reservations (id, agent_wallet, provider_id, amount_micro, expires_at)
     SELECT $5, $1, $2, amount, now() + make_interval(secs => $6) FROM held
     RETURNING amount_micro`,
);

/**
 * Holds between `minMicro` and `maxMicro` of the agent's available balance (balance minus what other
 * reservations hold), as much as is available. Returns null when less than `minMicro` is available or the
 * agent has no balance with this provider. The hold expires after `ttlSeconds` if never released.
 *
 * `fairShareAboveMicro` (default `maxMicro`: no limit): a hold beyond this amount takes at most a quarter of the
 * available balance, so that one busy session whose holds grow cannot take what the agent's other sessions need.
 */
export async function reserveFunds(
  db: Queryable,
  request: {
    agentWallet: string;
    providerId: string;
    minMicro: bigint;
    maxMicro: bigint;
    ttlSeconds: number;
    fairShareAboveMicro?: bigint;
  },
): Promise<Reservation | null> {
  const id = randomUUID();
  const { rows } = await runStatement<{ amount_micro: bigint }>(db, RESERVE, [
    request.agentWallet,
    request.providerId,
    request.minMicro,
    request.maxMicro,
    id,
    request.ttlSeconds,
    request.fairShareAboveMicro ?? request.maxMicro,
  ]);
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
 * Locks the reservation before its balance row, as every statement that touches both does (the charge batch,
 * release with a charge, void): statements that take the two locks in opposite orders deadlock, and PostgreSQL only breaks a
 * deadlock after `deadlock_timeout` (1 s), stalling the whole charge writer meanwhile.
 */
const EXTEND = ledgerStatement(
  "extend",
  `WITH held AS (
       SELECT agent_wallet, provider_id FROM reservations WHERE id = $1 FOR UPDATE),
     raised AS (
       UPDATE balances b
          SET reserved_micro = b.reserved_micro + ${holdAmount("$2", "$3", "$5")},
              last_hold_micro = ${holdAmount("$2", "$3", "$5")}
         FROM held r
        WHERE b.agent_wallet = r.agent_wallet AND b.provider_id = r.provider_id
          AND ${AVAILABLE} >= $2::bigint
       RETURNING b.last_hold_micro AS delta)
     UPDATE reservations SET amount_micro = amount_micro + raised.delta, expires_at = now() + make_interval(secs => $4)
       FROM raised WHERE id = $1
     RETURNING raised.delta`,
);

/**
 * Adds between `minDeltaMicro` and `maxDeltaMicro` to a held reservation, as much as the agent's available
 * balance allows, and pushes its expiry out by `ttlSeconds`. Returns what was added: 0n (and nothing changed)
 * when less than `minDeltaMicro` is available or the reservation no longer exists. `fairShareAboveMicro` as
 * for {@link reserveFunds}.
 */
export async function extendReservation(
  db: Queryable,
  reservation: Reservation,
  minDeltaMicro: bigint,
  maxDeltaMicro: bigint,
  ttlSeconds = 300,
  fairShareAboveMicro = maxDeltaMicro,
): Promise<bigint> {
  const { rows } = await runStatement<{ delta: bigint }>(db, EXTEND, [
    reservation.id,
    minDeltaMicro,
    maxDeltaMicro,
    ttlSeconds,
    fairShareAboveMicro,
  ]);
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

/** One charge (a REST query, a proxy session's window) against a held reservation. */
export interface ReservationCharge {
  reservationId: string;
  agentWallet: string;
  providerId: string;
  costMicro: bigint;
  metadata: Record<string, unknown>;
  /**
   * Written with the entry (unique): a charge retried after its connection was lost, when it may or may not
   * have been committed, is written once. The charge writer gives every charge one.
   */
  key?: string;
  /**
   * How long the charge writer retries this charge while the ledger is unavailable; default: the reservation's
   * TTL. A request that is waiting for its charge to answer sets less.
   */
  retryForMs?: number;
}

/**
 * The group-committed charge batch. Costs per batch (one transaction, one WAL flush, three tables touched) and
 * per entry (a heap row and two index entries) are kept apart on purpose: the writer makes batches big, so the
 * per-entry part is what has to be small. The reservation's expiry is pushed out only once half of its TTL has
 * gone by: rewriting it every batch would change an indexed column and make every reservation update a non-HOT
 * update with two new index entries.
 */
export const CHARGE_BATCH = ledgerStatement(
  "charge_batch",
  `WITH given AS (
     SELECT * FROM ROWS FROM (unnest($1::uuid[]), unnest($2::bigint[]), jsonb_array_elements($3::jsonb),
                              unnest($5::uuid[]))
                   WITH ORDINALITY AS t(reservation_id, cost, metadata, charge_key, ord)),
   written AS (
     -- One index probe per charge (LATERAL with LIMIT is never turned into a join), whatever the statistics say:
     -- as a join, a generic plan may hash the whole ledger on every batch.
     SELECT g.charge_key FROM given g
      CROSS JOIN LATERAL (SELECT 1 FROM ledger_entries e
                           WHERE e.charge_key = g.charge_key AND e.charge_key IS NOT NULL LIMIT 1) found),
   input AS (
     SELECT * FROM given WHERE charge_key IS NULL OR charge_key NOT IN (SELECT charge_key FROM written)),
   drawn AS (
     UPDATE reservations r
        SET amount_micro = r.amount_micro - pr.total,
            expires_at = CASE WHEN r.expires_at < now() + make_interval(secs => $4::float8 / 2)
                              THEN now() + make_interval(secs => $4::float8) ELSE r.expires_at END
       FROM (SELECT reservation_id, sum(cost)::bigint AS total FROM input GROUP BY reservation_id) pr
      WHERE r.id = pr.reservation_id
     RETURNING r.id, r.agent_wallet, r.provider_id, pr.total),
   charged AS (
     UPDATE balances b
        SET balance_micro = b.balance_micro - pb.total, reserved_micro = b.reserved_micro - pb.total, updated_at = now(),
            ${spendToday("pb.total")}
       FROM (SELECT agent_wallet, provider_id, sum(total)::bigint AS total FROM drawn GROUP BY agent_wallet, provider_id) pb
      WHERE b.agent_wallet = pb.agent_wallet AND b.provider_id = pb.provider_id
     RETURNING b.agent_wallet, b.provider_id, b.balance_micro + pb.total AS before_micro),
   chained AS (
     SELECT c.agent_wallet, c.provider_id, i.cost, i.metadata, i.charge_key, i.ord,
            c.before_micro - (sum(i.cost) OVER (PARTITION BY c.agent_wallet, c.provider_id ORDER BY i.ord))::bigint AS after_micro
       FROM input i JOIN drawn d ON d.id = i.reservation_id
       JOIN charged c ON c.agent_wallet = d.agent_wallet AND c.provider_id = d.provider_id),
   entries AS (
     INSERT INTO ledger_entries (agent_wallet, provider_id, type, amount_micro, balance_before_micro,
                                 balance_after_micro, metadata, charge_key)
     SELECT agent_wallet, provider_id, 'query', -cost, after_micro + cost, after_micro, metadata, charge_key
       FROM chained ORDER BY ord)
   SELECT id::text AS reservation_id, NULL::text AS written_key FROM drawn
   UNION ALL SELECT NULL, charge_key::text FROM written`,
);

/** A PostgreSQL array literal of values whose text needs no quoting (UUIDs, integers). */
function arrayLiteral(values: readonly (string | bigint)[]): string {
  return `{${values.join(",")}}`;
}

/**
 * Charges several statements against their (still held) reservations in one statement: each charge moves its
 * cost out of both the balance and the reservation and appends its own `query` entry, in the given order, with
 * balanceBefore/balanceAfter chained per agent and provider. Group commit for the wire proxy: many sessions'
 * charges cost one round trip. Charges of 0 are skipped. Returns the entries written; a charge whose
 * reservation no longer exists is returned in `missing` (its caller charges it without a reservation). A charge
 * whose key is already in the ledger (an earlier attempt was committed, its answer lost) is not written again.
 */
export async function chargeReservations(
  db: Queryable,
  charges: readonly ReservationCharge[],
  ttlSeconds = 300,
): Promise<{ written: number; missing: ReservationCharge[] }> {
  const due = charges.filter((charge) => charge.costMicro > 0n);
  if (due.length === 0) return { written: 0, missing: [] };
  try {
    const { rows } = await runStatement<{ reservation_id: string | null; written_key: string | null }>(
      db,
      CHARGE_BATCH,
      [
        // Array literals and one JSON array built here: node-postgres would run two escaping regular expressions
        // over every element of an array parameter (and stringify each jsonb element first). Neither a UUID nor
        // a decimal integer has a character an array literal must escape.
        arrayLiteral(due.map((c) => c.reservationId)),
        arrayLiteral(due.map((c) => c.costMicro)),
        JSON.stringify(due.map((c) => c.metadata)),
        ttlSeconds,
        `{${due.map((c) => c.key ?? "NULL").join(",")}}`,
      ],
    );
    const charged = new Set(rows.map((row) => row.reservation_id));
    const earlier = new Set(rows.map((row) => row.written_key));
    const missing = due.filter(
      (charge) => !charged.has(charge.reservationId) && !(charge.key && earlier.has(charge.key)),
    );
    return { written: due.length - missing.length, missing };
  } catch (error) {
    if (isOverdraft(error))
      throw new InsufficientFundsError("a batched charge exceeds what its reservation holds");
    throw error;
  }
}

const RELEASE_CHARGED = ledgerStatement(
  "release_charged",
  `WITH released AS (
         DELETE FROM reservations WHERE id = $1 RETURNING agent_wallet, provider_id, amount_micro),
       charged AS (
         UPDATE balances b
            SET balance_micro = b.balance_micro - $2::bigint,
                reserved_micro = b.reserved_micro - released.amount_micro,
                updated_at = CASE WHEN $2::bigint > 0 THEN now() ELSE b.updated_at END,
                ${spendToday("$2::bigint")}
           FROM released
          WHERE b.agent_wallet = released.agent_wallet AND b.provider_id = released.provider_id
         RETURNING b.agent_wallet, b.provider_id, b.balance_micro),
       entry AS (
         INSERT INTO ledger_entries (agent_wallet, provider_id, type, amount_micro, balance_before_micro,
                                     balance_after_micro, metadata, charge_key)
         SELECT agent_wallet, provider_id, 'query', -$2::bigint, balance_micro + $2::bigint, balance_micro, $3, $4::uuid
           FROM charged WHERE $2::bigint > 0
         RETURNING ${ENTRY_COLUMNS})
       SELECT entry.*, EXISTS (SELECT 1 FROM released) AS released FROM (SELECT 1) one LEFT JOIN entry ON true`,
);

/**
 * Ends a reservation by charging `costMicro` (which may differ from what was held) and releasing the rest,
 * appending one `query` ledger entry with `metadata` when the cost is above zero. Throws
 * {@link InsufficientFundsError} when the cost exceeds what the agent can pay; nothing changes then.
 * A reservation that already expired is charged directly from the available balance. `key`, when given, is
 * written with the entry, so that a retry after a lost acknowledgement (through {@link chargeWithoutReservation}
 * or the charge writer, with the same key) does not charge twice.
 */
export async function releaseWithCharge(
  db: Queryable,
  reservation: Reservation,
  costMicro: bigint,
  metadata: Record<string, unknown>,
  key?: string,
): Promise<LedgerEntry | null> {
  try {
    const { rows } = await runStatement<EntryRow & { released: boolean }>(db, RELEASE_CHARGED, [
      reservation.id,
      costMicro,
      metadata,
      key ?? null,
    ]);
    const row = rows[0];
    if (row?.released) return row.id === null ? null : toEntry(row);
  } catch (error) {
    if (isOverdraft(error)) throw new InsufficientFundsError("the balance does not cover this charge");
    throw error;
  }
  return chargeWithoutReservation(db, reservation, costMicro, metadata, key);
}

const CHARGE_DIRECT = ledgerStatement(
  "charge_direct",
  `WITH charged AS (
         UPDATE balances b SET balance_micro = b.balance_micro - $3::bigint, updated_at = now(), ${spendToday("$3::bigint")}
          WHERE b.agent_wallet = $1 AND b.provider_id = $2
         RETURNING b.agent_wallet, b.provider_id, b.balance_micro)
       INSERT INTO ledger_entries (agent_wallet, provider_id, type, amount_micro, balance_before_micro,
                                   balance_after_micro, metadata, charge_key)
       SELECT agent_wallet, provider_id, 'query', -$3::bigint, balance_micro + $3::bigint, balance_micro, $4, $5
         FROM charged
       RETURNING ${ENTRY_COLUMNS}`,
);

const CHARGE_WRITTEN = ledgerStatement(
  "charge_written",
  `SELECT ${ENTRY_COLUMNS} FROM ledger_entries WHERE charge_key = $1`,
);

/**
 * Charges `costMicro` straight from the balance (no reservation), appending one `query` entry. With `key`, a
 * charge already written under that key (an earlier attempt whose answer was lost) is returned, not repeated.
 */
export async function chargeWithoutReservation(
  db: Queryable,
  target: { agentWallet: string; providerId: string },
  costMicro: bigint,
  metadata: Record<string, unknown>,
  key?: string,
): Promise<LedgerEntry | null> {
  if (costMicro === 0n) return null;
  if (key) {
    const { rows } = await runStatement<EntryRow>(db, CHARGE_WRITTEN, [key]);
    if (rows[0]) return toEntry(rows[0]);
  }
  try {
    const { rows } = await runStatement<EntryRow>(db, CHARGE_DIRECT, [
      target.agentWallet,
      target.providerId,
      costMicro,
      metadata,
      key ?? null,
    ]);
    if (!rows[0]) throw new InsufficientFundsError("the agent has no balance with this provider");
    return toEntry(rows[0]);
  } catch (error) {
    if (isOverdraft(error)) throw new InsufficientFundsError("the balance does not cover this charge");
    throw error;
  }
}

const VOID = ledgerStatement(
  "void",
  `WITH released AS (DELETE FROM reservations WHERE id = $1 RETURNING agent_wallet, provider_id, amount_micro)
     UPDATE balances b SET reserved_micro = b.reserved_micro - released.amount_micro
       FROM released WHERE b.agent_wallet = released.agent_wallet AND b.provider_id = released.provider_id`,
);

/** Releases a reservation without charging anything. Safe to call twice. */
export async function voidReservation(db: Queryable, reservation: Reservation): Promise<void> {
  await runStatement(db, VOID, [reservation.id]);
}

const SHRINK = ledgerStatement(
  "shrink",
  `WITH held AS (
       SELECT id, agent_wallet, provider_id, LEAST(amount_micro, $2::bigint) AS back
         FROM reservations WHERE id = $1 FOR UPDATE),
     shrunk AS (
       UPDATE reservations r SET amount_micro = r.amount_micro - held.back FROM held WHERE r.id = held.id
       RETURNING held.agent_wallet, held.provider_id, held.back)
     UPDATE balances b SET reserved_micro = b.reserved_micro - shrunk.back
       FROM shrunk WHERE b.agent_wallet = shrunk.agent_wallet AND b.provider_id = shrunk.provider_id
     RETURNING shrunk.back`,
);

/**
 * Gives back up to `micro` of a held reservation without releasing it (what its holder will not spend); the rest
 * stays held for the charges still queued against it. Returns what was given back (0n when it no longer exists).
 */
export async function shrinkReservation(
  db: Queryable,
  reservation: Reservation,
  micro: bigint,
): Promise<bigint> {
  const { rows } = await runStatement<{ back: bigint }>(db, SHRINK, [reservation.id, micro]);
  const back = rows[0]?.back ?? 0n;
  reservation.amountMicro -= back;
  return back;
}

const RELEASE_EXPIRED = ledgerStatement(
  "release_expired",
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

/** Releases every reservation past its expiry (left by a crashed process). Returns how many. */
export async function releaseExpiredReservations(db: Queryable): Promise<number> {
  const { rows } = await runStatement<{ released: number }>(db, RELEASE_EXPIRED);
  return rows[0]?.released ?? 0;
}

export interface DepositCredit {
  chainId: number;
  txHash: string;
  agentWallet: string;
  providerId: string;
  amountMicro: bigint;
  blockNumber: bigint;
  /** Written into the entry's metadata beside chainId and blockNumber (an x402 payment's source and nonce). */
  metadata?: Record<string, string>;
}

const CREDIT_DEPOSIT = ledgerStatement(
  "credit_deposit",
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
            jsonb_build_object('chainId', $1::int, 'blockNumber', $6::text) || $7::jsonb
       FROM recorded, credited
     RETURNING ${ENTRY_COLUMNS}`,
);

/**
 * Credits a verified deposit: records (chainId, txHash), raises the balance and appends a `deposit` entry,
 * all in one statement. Returns null when that transaction was already credited (the primary key of
 * `deposits` decides, however many requests race).
 */
export async function creditDeposit(db: Queryable, deposit: DepositCredit): Promise<LedgerEntry | null> {
  const { rows } = await runStatement<EntryRow>(db, CREDIT_DEPOSIT, [
    deposit.chainId,
    deposit.txHash,
    deposit.agentWallet,
    deposit.providerId,
    deposit.amountMicro,
    deposit.blockNumber,
    deposit.metadata ?? {},
  ]);
  return rows[0] ? toEntry(rows[0]) : null;
}

const BALANCE = ledgerStatement(
  "balance",
  "SELECT balance_micro, reserved_micro, updated_at FROM balances WHERE agent_wallet = $1 AND provider_id = $2",
);

/** The agent's balance with a provider; zero with `updatedAt` null when it never had one. */
export async function getBalance(
  db: Queryable,
  agentWallet: string,
  providerId: string,
): Promise<BalanceRecord> {
  const { rows } = await runStatement<{ balance_micro: bigint; reserved_micro: bigint; updated_at: Date }>(
    db,
    BALANCE,
    [agentWallet, providerId],
  );
  const row = rows[0];
  if (!row) return { balanceMicro: 0n, reservedMicro: 0n, updatedAt: null };
  return { balanceMicro: row.balance_micro, reservedMicro: row.reserved_micro, updatedAt: row.updated_at };
}

const LIST_PROVIDER_ENTRIES = ledgerStatement(
  "provider_entries",
  `SELECT ${ENTRY_COLUMNS} FROM ledger_entries
    WHERE agent_wallet = $1 AND provider_id = $2
    ORDER BY id DESC LIMIT $3`,
);

/**
 * Every entry has its (agent, provider) balance row, so the agent's newest entries are the newest of each
 * provider's newest: one short backward walk of the (agent_wallet, provider_id, id) index per provider, and no
 * index of entries by agent alone for every append to maintain.
 */
const LIST_AGENT_ENTRIES = ledgerStatement(
  "agent_entries",
  `SELECT e.* FROM balances b
     CROSS JOIN LATERAL (
       SELECT ${ENTRY_COLUMNS} FROM ledger_entries
        WHERE agent_wallet = b.agent_wallet AND provider_id = b.provider_id
        ORDER BY id DESC LIMIT $2) e
    WHERE b.agent_wallet = $1
    ORDER BY e.id DESC LIMIT $2`,
);

/** The agent's ledger entries, newest first, optionally for one provider. */
export async function listLedgerEntries(
  db: Queryable,
  agentWallet: string,
  options: { providerId?: string; limit: number },
): Promise<LedgerEntry[]> {
  const { rows } = options.providerId
    ? await runStatement<EntryRow>(db, LIST_PROVIDER_ENTRIES, [
        agentWallet,
        options.providerId,
        options.limit,
      ])
    : await runStatement<EntryRow>(db, LIST_AGENT_ENTRIES, [agentWallet, options.limit]);
  return rows.map(toEntry);
}
