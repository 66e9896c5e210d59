import type pg from "pg";
import { INVALID_SQL_RULE } from "../analytics/refusal-tally.js";
import { formatPrice, formatPricePer1000Rows, type Price, priceForRelations } from "../billing/cost.js";
import { formatMicro } from "../billing/money.js";
import { costOfStatements, type MeteredStatement } from "../billing/request-cost.js";
import type { GuardedStatement, GuardVerdict } from "../guard/index.js";
import type { EstimateCache } from "./estimate-cache.js";
import { estimateStatements, NOT_PLANNED } from "./plan-rows.js";

/**
 * What statements would cost by the planner's estimates, by the one cost rule (request-cost.ts), as agents read
 * it: MCP's `estimate` and `POST /api/providers/:id/quote` both answer with it. Time is not estimated.
 */
export function quoteOf(planned: readonly MeteredStatement[], price: Price) {
  const cost = costOfStatements(planned, price);
  let rowPrice = priceForRelations(price, planned[0]?.relations);
  for (const statement of planned.slice(1)) {
    const own = priceForRelations(price, statement.relations);
    if (own.picoUsdcPer1000Rows > rowPrice.picoUsdcPer1000Rows) rowPrice = own;
  }
  return {
    estimatedCostMicro: cost.costMicro,
    view: {
      estimatedRows: Number(cost.rows),
      estimatedBytes: Number(cost.bytes),
      estimatedCost: formatMicro(cost.costMicro),
      costBreakdown: {
        rowsCost: formatMicro(cost.rowsMicro),
        bytesCost: formatMicro(cost.bytesMicro),
        minimumApplied: cost.minimumApplied,
      },
      pricePer1000Rows: formatPricePer1000Rows(rowPrice),
      price: formatPrice(price),
    },
  };
}

/** The planner's estimate of each statement on `client` (EXPLAIN, or a recent one), with the relations it reads. */
export async function planStatements(
  client: pg.ClientBase,
  statements: GuardedStatement[],
  params: readonly unknown[] | undefined,
  estimates: EstimateCache,
  providerId: string,
): Promise<MeteredStatement[]> {
  const planned = await estimateStatements(client, statements, params, estimates, providerId);
  return statements.map((statement, index) => ({ relations: statement.relations, usage: planned[index]! }));
}

/** Each statement with its recent estimate (none needed when it is not explainable); undefined when one is not known. */
function knownPlans(
  statements: readonly GuardedStatement[],
  estimates: EstimateCache,
  providerId: string,
): MeteredStatement[] | undefined {
  const planned: MeteredStatement[] = [];
  for (const statement of statements) {
    const usage = statement.explainable ? estimates.get(providerId, statement.sql) : NOT_PLANNED;
    if (!usage) return undefined;
    planned.push({ relations: statement.relations, usage });
  }
  return planned;
}

export interface QuoteDeps {
  check(sql: string): GuardVerdict;
  estimates: EstimateCache;
  /** The provider's pool of read-only sessions: EXPLAIN alone runs there, in a read-only transaction. */
  reader: pg.Pool;
  statementTimeoutMs: number;
}

export type QueryQuote =
  | { allowed: false; refusal: { rule: string; message: string } }
  | ({ allowed: true } & ReturnType<typeof quoteOf>["view"] & { estimatedCostMicro: bigint });

export class QuoteError extends Error {
  override name = "QuoteError";
  constructor(
    readonly statusCode: number,
    message: string,
  ) {
    super(message);
  }
}

/**
 * Whether the provider's policy allows `sql` (the guard's rule when it does not) and what it would cost,
 * without running it: each statement is only EXPLAINed, in a read-only transaction bounded by the statement
 * timeout. A statement the planner cannot plan is estimated at 0 rows, as `POST /api/query` estimates it.
 */
export async function quoteQuery(
  deps: QuoteDeps,
  request: { providerId: string; sql: string; params?: unknown[]; price: Price },
): Promise<QueryQuote> {
  const verdict = deps.check(request.sql);
  if (verdict.kind === "invalid")
    return { allowed: false, refusal: { rule: INVALID_SQL_RULE, message: verdict.message } };
  if (verdict.kind === "deny")
    return { allowed: false, refusal: { rule: verdict.rule, message: verdict.message } };
  if (request.params && request.params.length > 0 && verdict.statements.length !== 1)
    throw new QuoteError(400, "params can only be used with a single statement");
  const known = knownPlans(verdict.statements, deps.estimates, request.providerId);
  if (known) {
    const { view, estimatedCostMicro } = quoteOf(known, request.price);
    return { allowed: true, ...view, estimatedCostMicro };
  }
  let client: pg.PoolClient;
  try {
    client = await deps.reader.connect();
  } catch {
    throw new QuoteError(503, "the provider's database cannot be reached; try again later");
  }
  let broken: Error | undefined;
  try {
    await client.query("BEGIN READ ONLY");
    await client.query(`SET LOCAL statement_timeout = ${Math.max(1, Math.floor(deps.statementTimeoutMs))}`);
    const planned = await planStatements(
      client,
      verdict.statements,
      request.params,
      deps.estimates,
      request.providerId,
    );
    await client.query("ROLLBACK");
    const { view, estimatedCostMicro } = quoteOf(planned, request.price);
    return { allowed: true, ...view, estimatedCostMicro };
  } catch (error) {
    broken = error as Error;
    throw new QuoteError(503, "the provider's database did not answer the estimate; try again later");
  } finally {
    client.release(broken);
  }
}
