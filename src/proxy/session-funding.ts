import type { Price } from "../billing/cost.js";
import { statementCost } from "../billing/cost.js";
import { getBalance, type Queryable } from "../billing/ledger.js";

/**
 * Whether an agent may have a provider's database opened for it, and with which share of its upstream pool:
 * - `funded`: its available balance (balance less what holds keep) pays at least one row at the provider's
 *   price (with a provider that charges nothing: it has any balance at all);
 * - `free-tier`: the provider charges nothing and the agent has no balance; admitted, but never into the share
 *   kept for funded agents (PGTOLL_FUNDED_RESERVE_PERCENT);
 * - `unfunded`: the provider charges and the agent cannot pay a row: no upstream session is opened for it.
 *   Funding needs no session: `POST /api/topup` (x402) and `POST /api/deposit` are HTTP requests.
 */
export type FundingTier = "funded" | "free-tier" | "unfunded";

export interface AgentFunding {
  tier: FundingTier;
  availableMicro: bigint;
  /** What the agent's holds (its open sessions', in any process) keep from the balance. */
  heldMicro: bigint;
  /** One row at the provider's price: what a session needs available. */
  neededMicro: bigint;
}

/** One ledger read: the agent's balance row with the provider. */
export async function agentFunding(
  db: Queryable,
  agentWallet: string,
  providerId: string,
  price: Price,
): Promise<AgentFunding> {
  const { balanceMicro, reservedMicro } = await getBalance(db, agentWallet, providerId);
  const availableMicro = balanceMicro - reservedMicro;
  const neededMicro = statementCost({ rows: 1 }, price);
  const tier: FundingTier =
    neededMicro === 0n
      ? availableMicro > 0n
        ? "funded"
        : "free-tier"
      : availableMicro >= neededMicro
        ? "funded"
        : "unfunded";
  return { tier, availableMicro, heldMicro: reservedMicro, neededMicro };
}

/** Of `limit` places, how many PGTOLL_FUNDED_RESERVE_PERCENT keeps for funded agents (rounded down). */
export function fundedShare(limit: number, percent: number): number {
  return Math.floor((limit * percent) / 100);
}
