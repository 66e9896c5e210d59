import { formatPricePer1000Rows, statementCost } from "../billing/cost.js";
import { formatMicro } from "../billing/money.js";
import { SqlState } from "../db/sql-state.js";
import { checkSql, loadGuard } from "../guard/index.js";
import { planEstimate, type QueryPlan } from "../rest/plan-rows.js";
import { quoteOf } from "../rest/query-quote.js";
import { type AgentAccount, FundsRequiredError } from "./funds-required.js";
import { type ProxySession, StatementFailure } from "./proxy-session.js";

/** A ledger entry as the gateway presents it (`GET /api/transactions/:wallet`). */
export type LedgerEntryView = Record<string, unknown>;

/** An agent's daily limit with a provider, as the gateway presents it. */
export interface DailyLimitView {
  dailyLimit: string | null;
  spentToday: string;
  remainingToday: string | null;
  resetsAt: string;
}

/** What the MCP tools act through, for one agent and one provider. */
export interface AgentBackend {
  providerId: string;
  wallet: string;
  /** Opened by the tools that need the provider's database, and only then. */
  session: ProxySession;
  /** Balance, price and deposit address for the free tools: read without an upstream session where possible. */
  account(): Promise<AgentAccount>;
  /** The agent's newest ledger entries with the provider. */
  transactions(limit: number): Promise<LedgerEntryView[]>;
  /** The agent's daily limit with the provider, as `GET /api/agents/:wallet/limits/:providerId` answers it. */
  dailyLimit(): Promise<DailyLimitView>;
  /** Sending USDC on chain: only where the agent's key is at hand (the stdio server) and deposits are allowed. */
  deposit?: {
    maxMicro: bigint;
    send(amount: string): Promise<{ txHash: string; amount: string; balance: string }>;
  };
}

/** The relations `sql` names, as the proxy prices them (undefined when the guard cannot tell). */
async function relationsOf(sql: string): Promise<string[] | undefined> {
  await loadGuard();
  const verdict = checkSql(sql);
  return verdict.kind === "allow" && verdict.statements.length === 1
    ? verdict.statements[0]!.relations
    : undefined;
}

/**
 * The command tag PostgreSQL would report for `sql` ("SELECT", "INSERT" ...), for a result cut before its
 * CommandComplete (at max_rows or max_cost); "" when the guard cannot tell.
 */
export async function commandOf(sql: string): Promise<string> {
  await loadGuard();
  const verdict = checkSql(sql);
  return verdict.kind === "allow" && verdict.statements.length === 1 ? verdict.statements[0]!.command : "";
}

/**
 * The planner's estimate of a statement (rows, and bytes as rows x row width; time is not estimated) and what
 * that would cost by the provider's price, with its parts; the EXPLAIN itself is charged as a statement (with
 * `budgetMicro`, within it: `cutOff` when even the EXPLAIN's row did not fit, and then nothing is estimated).
 */
export async function estimateStatement(
  session: ProxySession,
  sql: string,
  params: unknown[] = [],
  budgetMicro?: bigint,
) {
  const { result, costMicro } = await session.statement(
    `EXPLAIN (FORMAT JSON) ${sql}`,
    params,
    1,
    budgetMicro,
  );
  const plan = (result.rows[0]?.["QUERY PLAN"] as QueryPlan[] | undefined)?.[0];
  const { view, estimatedCostMicro } = quoteOf(
    [{ relations: await relationsOf(sql), usage: planEstimate(plan?.Plan) }],
    await session.price(),
  );
  return {
    estimatedCostMicro,
    costMicro,
    cutOff: result.budgetReached,
    view: { ...view, cost: formatMicro(costMicro) },
  };
}

/**
 * The tool error for a failed `query`, written for a model: a policy refusal names its rule, a shortfall says
 * how much is missing and how to top up, anything else is PostgreSQL's own error with its SQLSTATE. A
 * statement cut off part way says what its delivered rows were charged.
 */
export async function queryFailure(backend: AgentBackend, error: unknown, maxRows: number): Promise<string> {
  // The proxy opened no session: the agent cannot pay a row.
  if (error instanceof FundsRequiredError) return insufficientBalance(backend, error.message, maxRows, "");
  if (!(error instanceof StatementFailure)) throw error;
  const charged = error.costMicro > 0n ? ` It was charged ${formatMicro(error.costMicro)} USDC.` : "";
  if (error.code === SqlState.insufficientPrivilege && error.message.startsWith("pgtoll policy:")) {
    const rule = /\(([a-z0-9-]+)\)/.exec(error.message)?.[1] ?? "policy";
    const reason = error.message.replace(/^pgtoll policy: (statement not allowed \([^)]*\): )?/, "");
    return `refused by the provider's policy, rule "${rule}": ${reason}`;
  }
  if (error.code === SqlState.insufficientFunds)
    return insufficientBalance(backend, error.message, maxRows, charged);
  const sqlstate = error.code ? ` (SQLSTATE ${error.code})` : "";
  return `${error.message}${sqlstate}.${charged}`;
}

async function insufficientBalance(
  backend: AgentBackend,
  message: string,
  maxRows: number,
  charged: string,
): Promise<string> {
  const { balanceMicro, price, depositAddress: address } = await backend.account();
  const upTo = statementCost({ rows: maxRows }, price);
  const oneRow = statementCost({ rows: 1 }, price);
  const missing = upTo - balanceMicro > oneRow ? upTo - balanceMicro : oneRow;
  const how = backend.deposit
    ? "call the deposit tool"
    : `send USDC to the provider's wallet ${address} and credit it with POST /api/deposit ` +
      `{txHash, agentWallet: "${backend.wallet}", providerId: "${backend.providerId}"}, or, where the gateway ` +
      `offers x402, pay a top-up from the wallet with POST /api/topup {agentWallet, providerId, amount}`;
  return (
    `${message}.${charged} Your balance with this provider is ${formatMicro(balanceMicro)} USDC; this call can ` +
    `cost up to ${formatMicro(upTo)} USDC (${maxRows} rows at ${formatPricePer1000Rows(price)} ` +
    `USDC per 1000 rows), so ${formatMicro(missing)} USDC is missing. To top up, ${how}.`
  );
}
