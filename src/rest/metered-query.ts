import { performance } from "node:perf_hooks";
import type pg from "pg";
import { INVALID_SQL_RULE, type RefusalTally } from "../analytics/refusal-tally.js";
import { costBreakdown, isFree, type Price, priceForRelations, statementCost } from "../billing/cost.js";
import { dailyLimitRefusing } from "../billing/daily-limits.js";
import { isLedgerUnavailable } from "../billing/ledger-availability.js";
import type { Queryable } from "../billing/ledger-statement.js";
import { formatMicro } from "../billing/money.js";
import { withholdsDatabaseText } from "../billing/priced-text.js";
import type { AgentLimits } from "../billing/pricing.js";
import { costOfStatements, type RequestCost, rowsWithinBudget } from "../billing/request-cost.js";
import type { GuardedStatement, GuardVerdict } from "../guard/index.js";
import type { StatementShapes } from "../guard/statement-shape.js";
import type { ResultLease, ResultMemory } from "../providers/result-memory.js";
import { PrivilegedUpstreamError } from "../providers/upstream-pools.js";
import type { EstimateCache } from "./estimate-cache.js";
import type { HeldFunds, RequestFunds } from "./held-funds.js";
import { BUDGET_EXCEEDED, QueryError, upstreamQueryError } from "./query-errors.js";
import { planStatements } from "./query-quote.js";
import { runReadOnly } from "./read-only-run.js";
import type { RunOutcome } from "./run-outcome.js";
import { type StatementTimeLimit, TimeLimitReached } from "./statement-timer.js";
import { type RequestTimeBound, requestTimeBound, timeLimitError } from "./time-limit.js";
import { executeInTransaction } from "./transaction-run.js";

export interface MeteredQueryRequest {
  agentWallet: string;
  providerId: string;
  sql: string;
  params?: unknown[];
  /** The provider's price. */
  price: Price;
  /** The limits the provider sets on agents: rows written per statement, lock timeout. */
  limits: Pick<AgentLimits, "maxRowsWrittenPerStatement" | "lockTimeoutMs">;
  /**
   * The agent's budget for this request (micro-USDC): an estimate above it is refused before anything runs, and
   * a result that would cost more is cut to the rows it pays for.
   */
  maxCostMicro?: bigint;
}

export interface MeteredQueryResult {
  rows: Record<string, unknown>[];
  rowCount: number;
  estimatedCostMicro: bigint;
  actualCostMicro: bigint;
  /** The actual cost's parts. */
  cost: RequestCost;
  /** The rows were cut to fit `maxCostMicro`. */
  truncated: boolean;
  executionMs: number;
  statements: { command: string; rowCount: number }[];
}

export interface MeteredQueryDeps {
  /** The guard's verdict on a SQL string (checkSql with the gateway's policy, possibly memoised). */
  check(sql: string): GuardVerdict;
  /** The agents' funds held by this process (two-phase charging). */
  funds: HeldFunds;
  /** Recent planner estimates, so a statement repeated with new params is not explained every time. */
  estimates: EstimateCache;
  /** Rows' worth of balance reserved at a time when an agent's requests need more. */
  reserveRows: number;
  upstream: pg.Pool;
  /**
   * The provider's pool of read-only sessions (`default_transaction_read_only=on` at connect): a single read runs
   * there without a transaction of its own. For a read-only provider it is `upstream` itself.
   */
  reader: pg.Pool;
  rowCap: number;
  /** Largest result read, in bytes of its rows (PGTOLL_MAX_RESULT_BYTES). */
  maxResultBytes: number;
  /** The process's result memory (PGTOLL_MAX_RESULTS_IN_MEMORY): each request's rows are counted in it. */
  resultMemory: ResultMemory;
  statementTimeoutMs: number;
  /** Where refused statements are counted (by rule, or the agent's funds) for the provider's analytics. */
  refusals: RefusalTally;
  /** The shape of a charged text, written into its ledger entry so that the analytics rank shapes. */
  shapes: StatementShapes;
  /** The ledger, asked why funds fell short (the balance, or the agent's daily limit). */
  ledger: Queryable;
}

/** Single statements that read and can run in a read-only transaction, answered in one round trip. */
const READ_ONLY_COMMANDS = new Set(["SELECT", "SHOW"]);

/**
 * Runs SQL for an agent on a provider's database, metered: guard, reservation, execution, charge. The agent is
 * never charged more than its available balance and receives no row it has not paid for: an agent with nothing
 * available is refused before anything runs (402); when the actual cost outgrows what it can pay, its writes
 * are rolled back and nothing is charged (402). A result above `rowCap` rows is refused uncharged before it is
 * held in memory. `estimatedCost` is the planner's row estimate (EXPLAIN) made before the statement ran,
 * reused for 10 s for the same text on the same provider (estimate-cache.ts).
 *
 * A single SELECT (or SHOW) runs in one round trip: BEGIN READ ONLY, EXPLAIN (unless reused), the statement,
 * COMMIT (read-only-run.ts); being read-only, its transaction has nothing to undo when it cannot be paid for.
 * Anything else (writes, several statements, session commands) runs in a read-write transaction that is
 * committed only once the cost is secured (transaction-run.ts). The funds come from held-funds.ts: a lone
 * request reserves before and is charged after; an agent's concurrent requests share one reservation.
 */
export async function runMeteredQuery(
  deps: MeteredQueryDeps,
  request: MeteredQueryRequest,
): Promise<MeteredQueryResult> {
  const verdict = deps.check(request.sql);
  if (verdict.kind === "invalid") {
    deps.refusals.count(request.providerId, "policy", INVALID_SQL_RULE);
    throw new QueryError(400, `invalid SQL: ${verdict.message}`);
  }
  if (verdict.kind === "deny") {
    deps.refusals.count(request.providerId, "policy", verdict.rule);
    throw new QueryError(403, `SQL not allowed (${verdict.rule}): ${verdict.message}`);
  }
  const statements = verdict.statements;
  if (request.params && request.params.length > 0 && statements.length !== 1) {
    throw new QueryError(400, "params can only be used with a single statement");
  }
  const paid = !isFree(request.price);
  if (request.maxCostMicro !== undefined) await refuseOverBudget(deps, request);
  const firstPrice = priceForRelations(request.price, statements[0]!.relations);
  let bound: RequestTimeBound | undefined;
  const lease = deps.resultMemory.lease(deps.maxResultBytes);
  const funds = paid
    ? deps.funds.join(
        request.agentWallet,
        request.providerId,
        statementCost({ rows: deps.reserveRows }, request.price),
      )
    : null;
  try {
    if (funds) {
      // Before running something must be available; what the statement is expected to cost is asked for.
      const first = firstPrice;
      const only = statements.length === 1 ? statements[0]! : undefined;
      const expected = (only && deps.estimates.get(request.providerId, only.sql)) || { rows: 1 };
      const usage = { rows: Math.max(1, expected.rows), bytes: "bytes" in expected ? expected.bytes : 0 };
      // With a time price, what its time may need is asked for in the same reservation.
      const timeWant = request.price.picoUsdcPerSecond
        ? timeWantOf(deps, request, first, usage, statements.length)
        : 0n;
      const expectedCost = statementCost(expected, first);
      // At least a row's worth: nothing reaches the provider's database unfunded, and an error costs a row.
      const covered = await funds
        .cover(statementCost({ rows: 1 }, first), timeWant > expectedCost ? timeWant : expectedCost)
        .catch(ledgerUnavailable("so the query was not run"));
      if (!covered) {
        await refuseOverDailyLimit(deps, request, statementCost({ rows: 1 }, first));
        deps.refusals.count(request.providerId, "funds", "insufficient-balance");
        throw new QueryError(402, "insufficient balance: deposit funds with this provider first");
      }
      if (timeWant > 0n) {
        const held = await funds
          .coverAvailable(timeWant)
          .catch(ledgerUnavailable("so the query was not run"));
        bound = requestTimeBound(held, usage, first, request.maxCostMicro);
      }
    }
    const started = performance.now();
    const fingerprint = deps.shapes.fingerprint(request.sql);
    let truncated = false;
    const outcome = await runOnProvider(deps, statements, request, funds, bound?.limit, lease, () => {
      truncated = true;
    }).catch(async (error: unknown) => {
      if (funds && bound && error instanceof TimeLimitReached)
        throw await stopAtTimeLimit(deps, request, funds, bound, firstPrice, fingerprint);
      if (error instanceof QueryError && error.statusCode === 402 && error.costMicro !== undefined)
        deps.refusals.count(request.providerId, "funds", "balance-cut-off");
      if (funds && error instanceof QueryError) {
        // A database error costs a row; the time a failed run took on the database is charged as far as held.
        const rows = error.databaseText ? 1 : 0;
        const ms = Math.ceil(bound?.limit.usedMs ?? 0);
        if (rows > 0 || ms > 0)
          await funds
            .charge(heldPart(costBreakdown({ rows, ms }, firstPrice).costMicro, funds, request), {
              sql: request.sql,
              fingerprint,
              rowCount: rows,
              source: "rest",
              failed: true,
              ...(ms > 0 ? { ms } : {}),
            })
            .catch(ledgerUnavailable("so the error is withheld (it was not charged)"));
      }
      throw error;
    });
    const executionMs = performance.now() - started;
    const cost = chargedCost(outcome, request);
    await funds
      ?.charge(cost.costMicro, chargeMetadata(request.sql, fingerprint, outcome.rowCount, cost))
      .catch(ledgerUnavailable("so the result is withheld (it was not charged)"));
    return {
      rows: outcome.rows,
      rowCount: outcome.rowCount,
      estimatedCostMicro: costOfStatements(
        outcome.runs.map((run) => ({ relations: run.relations, usage: run.estimated })),
        request.price,
      ).costMicro,
      actualCostMicro: cost.costMicro,
      cost,
      truncated,
      executionMs,
      statements: outcome.statements,
    };
  } finally {
    lease.release();
    await funds?.release();
  }
}

/** What a run refused after it ran is charged: nothing, or its time on the database when the price counts time. */
function chargedWhenRefused(price: Price): string {
  return price.picoUsdcPerSecond ? "only its time on the database was charged" : "nothing was charged";
}

/** At most what the request holds and its maxCost: a statement's time is charged as far as it was paid for. */
function heldPart(costMicro: bigint, funds: RequestFunds, request: MeteredQueryRequest): bigint {
  let most = funds.coveredMicro;
  if (request.maxCostMicro !== undefined && request.maxCostMicro < most) most = request.maxCostMicro;
  return costMicro < most ? costMicro : most;
}

/**
 * What a request's statement time may need held: the statement timeout's worth per statement after its expected
 * rows, at most its maxCost. The request holds that, or the agent's whole available balance (within its daily
 * limit) when it is less, and its time bound is what it holds.
 */
function timeWantOf(
  deps: MeteredQueryDeps,
  request: MeteredQueryRequest,
  price: Price,
  usage: { rows: number; bytes: number },
  statementCount: number,
): bigint {
  const want = statementCost({ ...usage, ms: deps.statementTimeoutMs * statementCount }, price);
  return request.maxCostMicro !== undefined && request.maxCostMicro < want ? request.maxCostMicro : want;
}

/**
 * The request's statement was cancelled at its time bound: its time is charged as far as it was held (one
 * `query` entry, committed before the answer), and the answer names the limit that stopped it.
 */
async function stopAtTimeLimit(
  deps: MeteredQueryDeps,
  request: MeteredQueryRequest,
  funds: RequestFunds,
  bound: RequestTimeBound,
  price: Price,
  fingerprint: string,
): Promise<QueryError> {
  const ms = Math.ceil(bound.limit.usedMs);
  const cost = heldPart(costBreakdown({ rows: 0, ms }, price).costMicro, funds, request);
  await funds
    .charge(cost, { sql: request.sql, fingerprint, rowCount: 0, source: "rest", failed: true, ms })
    .catch(ledgerUnavailable("so the statement's time was not charged"));
  const dailyLimit =
    bound.by === "funds"
      ? await dailyLimitRefusing(deps.ledger, request.agentWallet, request.providerId, 1n).catch(() => null)
      : null;
  const rule = bound.by === "max-cost" ? "max-cost" : dailyLimit ? "daily-limit" : "balance-cut-off";
  deps.refusals.count(request.providerId, "funds", rule);
  return timeLimitError(bound.by, bound.limit.usedMs, cost, request.maxCostMicro, dailyLimit);
}

/** The ledger entry's metadata of a request's charge: its bytes and time too when it used any. */
function chargeMetadata(
  sql: string,
  fingerprint: string,
  rowCount: number,
  cost: RequestCost,
): Record<string, unknown> {
  const metadata: Record<string, unknown> = { sql, fingerprint, rowCount, source: "rest" };
  if (cost.bytesMicro > 0n) metadata.bytes = Number(cost.bytes);
  if (cost.timeMicro > 0n) metadata.ms = Number(cost.ms);
  return metadata;
}

/** What the run costs, capped at the agent's budget: a run cut to its budget is charged at most that budget. */
function chargedCost(outcome: RunOutcome, request: MeteredQueryRequest): RequestCost {
  const cost = costOfStatements(outcome.runs, request.price);
  const budget = request.maxCostMicro;
  if (budget === undefined || cost.costMicro <= budget) return cost;
  return { ...cost, costMicro: budget };
}

/** 422 before anything runs when the planner's estimate of the request passes the agent's budget. */
async function refuseOverBudget(deps: MeteredQueryDeps, request: MeteredQueryRequest): Promise<void> {
  const estimated = await estimateCostMicro(deps, request);
  if (estimated > request.maxCostMicro!)
    throw new QueryError(
      422,
      `over budget: the estimated cost ${formatMicro(estimated)} USDC is above maxCost ${formatMicro(request.maxCostMicro!)} USDC; nothing was run or charged`,
      BUDGET_EXCEEDED,
    );
}

/** 422 when the agent's own daily limit, not its balance, kept a hold of `minMicro` from being taken. */
async function refuseOverDailyLimit(
  deps: MeteredQueryDeps,
  request: MeteredQueryRequest,
  minMicro: bigint,
): Promise<void> {
  const limit = await dailyLimitRefusing(
    deps.ledger,
    request.agentWallet,
    request.providerId,
    minMicro,
  ).catch(() => null);
  if (!limit) return;
  deps.refusals.count(request.providerId, "funds", "daily-limit");
  throw new QueryError(
    422,
    `over budget: your daily limit with this provider is ${formatMicro(limit.dailyLimitMicro!)} USDC and ${formatMicro(limit.spentTodayMicro)} was spent today (it resets at ${limit.resetsAt.toISOString()}); nothing was run or charged`,
    BUDGET_EXCEEDED,
  );
}

/**
 * Fits a run to the agent's budget before it is paid for: the rows of its last statement are cut to those the
 * budget pays for (`onTruncated` is told). A run that writes, or whose earlier statements alone pass the budget,
 * cannot be cut: 422, and the caller rolls it back.
 */
function fitToBudget(outcome: RunOutcome, request: MeteredQueryRequest, onTruncated: () => void): void {
  const budget = request.maxCostMicro;
  if (budget === undefined) return;
  const cost = costOfStatements(outcome.runs, request.price);
  if (cost.costMicro <= budget) return;
  const last = outcome.runs.at(-1);
  const before = costOfStatements(outcome.runs.slice(0, -1), request.price).costMicro;
  if (!last || outcome.runs.some((run) => run.writes) || before > budget)
    throw new QueryError(
      422,
      `over budget: this request costs ${formatMicro(cost.costMicro)} USDC, above maxCost ${formatMicro(budget)} USDC, and a write cannot be cut short; it was rolled back and ${chargedWhenRefused(request.price)}`,
      BUDGET_EXCEEDED,
    );
  const kept = rowsWithinBudget(last, outcome.rowBytes, request.price, budget - before);
  const dropped = outcome.rows.length - kept;
  outcome.rows = outcome.rows.slice(0, kept);
  outcome.rowBytes = outcome.rowBytes.slice(0, kept);
  const bytes = outcome.rowBytes.reduce((sum, size) => sum + size, 0);
  last.usage = { rows: kept, bytes, ms: last.usage.ms };
  outcome.rowCount -= dropped;
  const lastStatement = outcome.statements.at(-1);
  if (lastStatement) lastStatement.rowCount = kept;
  onTruncated();
}

/** Takes a connection of the provider's pool, runs the statements and secures their cost; 402 when it cannot. */
async function runOnProvider(
  deps: MeteredQueryDeps,
  statements: GuardedStatement[],
  request: MeteredQueryRequest,
  funds: RequestFunds | null,
  timeLimit: StatementTimeLimit | undefined,
  lease: ResultLease,
  onTruncated: () => void,
): Promise<RunOutcome> {
  const only = statements.length === 1 ? statements[0]! : undefined;
  const reads = only !== undefined && READ_ONLY_COMMANDS.has(only.command);
  let client = await connectTo(reads ? deps.reader : deps.upstream);
  let broken: Error | undefined;
  let outcome: RunOutcome | "read-write" = "read-write";
  try {
    // Copied only when the price counts time: the shared settings object is not rebuilt on every request.
    const settings = request.price.picoUsdcPerSecond ? { ...deps, timed: true, timeLimit } : deps;
    if (reads && only)
      outcome = await runReadOnly(
        client,
        settings,
        only,
        request.params,
        deps.estimates,
        request.providerId,
        lease,
      );
    if (outcome === "read-write") {
      if (reads && deps.reader !== deps.upstream) {
        // It writes after all (a function, nextval): a read-write transaction, on a read-write session.
        client.release();
        client = await connectTo(deps.upstream);
      }
      const { params, providerId, price, limits } = request;
      return await executeInTransaction(
        client,
        {
          ...settings,
          maxRowsWritten: limits.maxRowsWrittenPerStatement,
          lockTimeoutMs: limits.lockTimeoutMs,
        },
        statements,
        params,
        deps.estimates,
        providerId,
        (ran) => {
          fitToBudget(ran, request, onTruncated);
          return secure(deps, funds, ran, { ...request, price });
        },
        lease,
      );
    }
  } catch (error) {
    broken = await rollBack(client);
    if (error instanceof QueryError || error instanceof TimeLimitReached) throw error;
    const pricesTables = (request.price.tablePicoUsdcPer1000Rows?.size ?? 0) > 0;
    const withheld = statements.some((statement) => withholdsDatabaseText(statement, pricesTables));
    throw upstreamQueryError(error, deps.statementTimeoutMs, withheld);
  } finally {
    client.release(broken);
  }
  // Read-only: the connection is back in the pool before the ledger is asked for more.
  fitToBudget(outcome, request, onTruncated);
  await secure(deps, funds, outcome, request);
  return outcome;
}

/** A connection of `pool`; 403 when the provider's role turned superuser, 500 when the database is unreachable. */
async function connectTo(pool: pg.Pool): Promise<pg.PoolClient> {
  try {
    return await pool.connect();
  } catch (error) {
    if (error instanceof PrivilegedUpstreamError) throw new QueryError(403, error.message);
    throw new QueryError(
      500,
      `query execution failed: the provider's database is unreachable: ${(error as Error).message}`,
    );
  }
}

/** Covers the cost of a run from the agent's funds; 402 when the available balance cannot (422: its daily limit). */
async function secure(
  deps: MeteredQueryDeps,
  funds: RequestFunds | null,
  outcome: RunOutcome,
  request: MeteredQueryRequest,
): Promise<void> {
  const costMicro = chargedCost(outcome, request).costMicro;
  if (funds && !(await funds.cover(costMicro))) {
    await refuseOverDailyLimit(deps, request, costMicro);
    throw new QueryError(
      402,
      `insufficient balance: this result of ${outcome.rowCount} rows costs more than the available balance; ${chargedWhenRefused(request.price)}`,
      undefined,
      costMicro,
    );
  }
}

/**
 * What the request would cost by the planner's row estimates (EXPLAIN, or a recent estimate of the same text),
 * without running it; 0 when the guard refuses it or the provider cannot be reached (its own run says why).
 */
export async function estimateCostMicro(
  deps: MeteredQueryDeps,
  request: MeteredQueryRequest,
): Promise<bigint> {
  const verdict = deps.check(request.sql);
  if (verdict.kind !== "allow") return 0n;
  let client: pg.PoolClient;
  try {
    client = await deps.upstream.connect();
  } catch {
    return 0n;
  }
  try {
    const planned = await planStatements(
      client,
      verdict.statements,
      request.params,
      deps.estimates,
      request.providerId,
    );
    return costOfStatements(planned, request.price).costMicro;
  } finally {
    client.release();
  }
}

/**
 * Ends whatever transaction an error left open (a warning, no harm, when there is none); returns the error when
 * the connection is unusable, so that the pool discards it.
 */
async function rollBack(client: pg.PoolClient): Promise<Error | undefined> {
  try {
    await client.query("ROLLBACK");
    return undefined;
  } catch (error) {
    return error as Error;
  }
}

/** Rethrows an error of an unreachable ledger as a 503 the agent can act on; any other error as it is. */
function ledgerUnavailable(consequence: string): (error: unknown) => never {
  return (error) => {
    if (isLedgerUnavailable(error))
      throw new QueryError(503, `the pgtoll ledger is unavailable, ${consequence}; try again shortly`);
    throw error;
  };
}
