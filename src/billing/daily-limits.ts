import { ledgerStatement, type Queryable, runStatement } from "./ledger-statement.js";

/**
 * An agent's daily limit with one provider: a ceiling the agent sets on what it is charged per UTC day. It lives on
 * the (agent, provider) balance row, beside what was charged today, so that the ledger statements that hold funds
 * bound each hold by today's remainder in the same UPDATE that bounds it by the balance: two pgtoll processes
 * cannot pass it together, as they cannot overdraw.
 */
/** Today, as the daily limits count days: in UTC. */
const TODAY = "(now() AT TIME ZONE 'UTC')::date";

/** What balance row `b` has charged today (0 when its last charge was on an earlier day). */
const SPENT_TODAY = `(CASE WHEN b.spent_day = ${TODAY} THEN b.spent_today_micro ELSE 0 END)`;

/**
 * What a new hold may take from balance row `b`: the balance not held, and, under a daily limit, today's remainder
 * not held either (what is held may still be charged today), so that holds never pass the limit.
 */
export const AVAILABLE = `LEAST(b.balance_micro - b.reserved_micro,
  coalesce(b.daily_limit_micro - ${SPENT_TODAY} - b.reserved_micro, b.balance_micro - b.reserved_micro))`;

/** The SET items that count a charge of `amount` into balance row `b`'s spending today. */
export function spendToday(amount: string): string {
  return `spent_today_micro = ${SPENT_TODAY} + ${amount}, spent_day = ${TODAY}`;
}

export interface DailyLimit {
  /** null: no limit set. */
  dailyLimitMicro: bigint | null;
  spentTodayMicro: bigint;
  /** What today's charges may still add (0 once the limit is reached); null without a limit. */
  remainingTodayMicro: bigint | null;
  /** The next UTC midnight, when spentToday starts again from 0. */
  resetsAt: Date;
}

interface LimitRow {
  daily_limit_micro: bigint | null;
  spent_today_micro: bigint;
  resets_at: Date;
}

const LIMIT_COLUMNS = `b.daily_limit_micro, ${SPENT_TODAY} AS spent_today_micro,
  (${TODAY} + 1)::timestamp AT TIME ZONE 'UTC' AS resets_at`;

function toDailyLimit(row: LimitRow | undefined): DailyLimit {
  const limit = row?.daily_limit_micro ?? null;
  const spent = row?.spent_today_micro ?? 0n;
  const resetsAt = row?.resets_at ?? nextUtcMidnight();
  return {
    dailyLimitMicro: limit,
    spentTodayMicro: spent,
    remainingTodayMicro: limit === null ? null : limit > spent ? limit - spent : 0n,
    resetsAt,
  };
}

function nextUtcMidnight(): Date {
  const now = new Date();
  return new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate() + 1));
}

const GET_LIMIT = ledgerStatement(
  "daily_limit",
  `SELECT ${LIMIT_COLUMNS} FROM balances b WHERE b.agent_wallet = $1 AND b.provider_id = $2`,
);

/** The agent's daily limit with a provider and what it was charged today. */
export async function getDailyLimit(
  db: Queryable,
  agentWallet: string,
  providerId: string,
): Promise<DailyLimit> {
  const { rows } = await runStatement<LimitRow>(db, GET_LIMIT, [agentWallet, providerId]);
  return toDailyLimit(rows[0]);
}

/**
 * The channel on which the ledger tells every pgtoll process that an agent's daily limit with a provider changed;
 * the payload is `<agent wallet>/<provider id>`, both lower case (daily-limit-watch.ts).
 */
export const DAILY_LIMIT_CHANNEL = "pgtoll_daily_limit";

/**
 * NOTIFY in the statement that changes the limit: PostgreSQL delivers it when that transaction commits, and only
 * then, so a process never acts on a limit that was not set.
 */
const NOTIFY_CHANGED = `SELECT pg_notify('${DAILY_LIMIT_CHANNEL}', lower(agent_wallet) || '/' || lower(provider_id::text))`;

// The balance row is created when missing: an agent may set its limit before its first deposit.
const SET_LIMIT = ledgerStatement(
  "set_daily_limit",
  `WITH changed AS (
     INSERT INTO balances AS b (agent_wallet, provider_id, daily_limit_micro) VALUES ($1, $2, $3)
     ON CONFLICT (agent_wallet, provider_id) DO UPDATE SET daily_limit_micro = excluded.daily_limit_micro
     RETURNING b.agent_wallet, b.provider_id, ${LIMIT_COLUMNS}),
   notified AS (${NOTIFY_CHANGED} FROM changed)
   SELECT daily_limit_micro, spent_today_micro, resets_at FROM changed, notified`,
);

/**
 * Sets (or replaces) the agent's daily limit with a provider. It binds new holds at once, and the holds already
 * open in every pgtoll process on this ledger as soon as they are told (DAILY_LIMIT_CHANNEL): they give back
 * what they hold and have not spent, and hold again within the limit.
 */
export async function setDailyLimit(
  db: Queryable,
  agentWallet: string,
  providerId: string,
  dailyLimitMicro: bigint,
): Promise<DailyLimit> {
  const { rows } = await runStatement<LimitRow>(db, SET_LIMIT, [agentWallet, providerId, dailyLimitMicro]);
  return toDailyLimit(rows[0]);
}

const CLEAR_LIMIT = ledgerStatement(
  "clear_daily_limit",
  `WITH changed AS (
     UPDATE balances b SET daily_limit_micro = NULL
      WHERE b.agent_wallet = $1 AND b.provider_id = $2 AND b.daily_limit_micro IS NOT NULL
     RETURNING b.agent_wallet, b.provider_id),
   notified AS (${NOTIFY_CHANGED} FROM changed)
   SELECT 1 FROM changed, notified`,
);

/** Removes the agent's daily limit with a provider; false when there was none. */
export async function clearDailyLimit(
  db: Queryable,
  agentWallet: string,
  providerId: string,
): Promise<boolean> {
  const { rows } = await runStatement(db, CLEAR_LIMIT, [agentWallet, providerId]);
  return rows.length > 0;
}

// The limit refused the hold when its side of AVAILABLE is the lower one. That is asked as "today's remainder is
// below the balance", not as "today's remainder less what is held is below the minimum": the agent's other
// sessions hold, give back and are charged between the refused hold and this statement, which moves what is held
// (and, by a charge, both sides alike) but never which side is lower.
const LIMIT_BLOCKS = ledgerStatement(
  "daily_limit_blocks",
  `SELECT ${LIMIT_COLUMNS},
          b.daily_limit_micro - ${SPENT_TODAY} < b.balance_micro
            AND b.balance_micro - b.reserved_micro >= $3::bigint AS blocked
     FROM balances b WHERE b.agent_wallet = $1 AND b.provider_id = $2`,
);

/**
 * After a hold of `minMicro` failed: the agent's daily limit when it is what refused the hold (the balance alone
 * would have allowed it), else null (the balance is short). Whether the limit refused does not change with what
 * the agent's other sessions held, gave back or were charged between the hold and this question.
 */
export async function dailyLimitRefusing(
  db: Queryable,
  agentWallet: string,
  providerId: string,
  minMicro: bigint,
): Promise<DailyLimit | null> {
  const { rows } = await runStatement<LimitRow & { blocked: boolean | null }>(db, LIMIT_BLOCKS, [
    agentWallet,
    providerId,
    minMicro,
  ]);
  return rows[0]?.blocked ? toDailyLimit(rows[0]) : null;
}
