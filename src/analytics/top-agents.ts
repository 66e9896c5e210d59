import type { Queryable } from "../billing/ledger.js";
import {
  AGENT_SUMS_SQL,
  type ChargeFigures,
  type ChargeSumsRow,
  figuresOf,
  PROVIDER_CHARGES_IN_RANGE,
} from "./charge-figures.js";
import type { TimeRange } from "./time-range.js";

/** Where a page of agents starts: after the agent that ended the previous page in the ranking. */
export interface AgentCursor {
  spentMicro: bigint;
  wallet: string;
}

/** One agent's spending with a provider over a range, its balance now and when it last had an entry. */
export interface AgentSpend {
  wallet: string;
  spentMicro: bigint;
  statements: number;
  rows: number;
  balanceMicro: bigint;
  lastActive: Date | null;
}

/**
 * Agents ranked by spend, most first, ties by wallet. The cursor condition is applied to the sums, so each page
 * sums the range once; the balance and last activity are read for the page's agents only (primary key and
 * ledger_entries_agent_provider_id_idx), and last activity is the agent's newest entry of any range.
 */
export const AGENTS_SQL = `WITH spend AS (
  SELECT e.agent_wallet, ${AGENT_SUMS_SQL}, sum(-e.amount_micro) AS spent
    FROM ledger_entries e
   WHERE ${PROVIDER_CHARGES_IN_RANGE}
   GROUP BY e.agent_wallet),
page AS (
  SELECT * FROM spend
   WHERE $5::bigint IS NULL OR spent < $5::bigint OR (spent = $5::bigint AND agent_wallet > $6)
   ORDER BY spent DESC, agent_wallet
   LIMIT $4)
SELECT page.agent_wallet, page.revenue_micro, page.statements, page.rows, page.agents,
       COALESCE(b.balance_micro, 0)::text AS balance_micro,
       (SELECT l.created_at FROM ledger_entries l
         WHERE l.agent_wallet = page.agent_wallet AND l.provider_id = $1
         ORDER BY l.id DESC LIMIT 1) AS last_active
  FROM page
  LEFT JOIN balances b ON b.agent_wallet = page.agent_wallet AND b.provider_id = $1
 ORDER BY page.spent DESC, page.agent_wallet`;

/** Up to `limit` agents after `cursor` (from the top when null), and whether more follow. */
export async function topAgents(
  db: Queryable,
  providerId: string,
  range: TimeRange,
  limit: number,
  cursor: AgentCursor | null,
): Promise<{ agents: AgentSpend[]; next: AgentCursor | null }> {
  const { rows } = await db.query<
    ChargeSumsRow & { agent_wallet: string; balance_micro: string; last_active: Date | null }
  >(AGENTS_SQL, [
    providerId,
    range.from,
    range.to,
    limit + 1,
    cursor ? cursor.spentMicro.toString() : null,
    cursor?.wallet ?? null,
  ]);
  const agents = rows.slice(0, limit).map((row) => {
    const figures: ChargeFigures = figuresOf(row);
    return {
      wallet: row.agent_wallet,
      spentMicro: figures.revenueMicro,
      statements: figures.statements,
      rows: figures.rows,
      balanceMicro: BigInt(row.balance_micro),
      lastActive: row.last_active,
    };
  });
  const last = agents[agents.length - 1];
  const next = rows.length > limit && last ? { spentMicro: last.spentMicro, wallet: last.wallet } : null;
  return { agents, next };
}
