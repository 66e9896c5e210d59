import { performance } from "node:perf_hooks";
import { INVALID_SQL_RULE, type RefusalTally } from "../analytics/refusal-tally.js";
import { formatMicro, parseMicro } from "../billing/money.js";
import { SqlState } from "../db/sql-state.js";
import type { GuardedStatement, GuardVerdict } from "../guard/index.js";
import type { ResultMemory } from "../providers/result-memory.js";
import { RESULT_TOO_LARGE_PREFIX, ROW_TOO_LARGE_PREFIX } from "../proxy/metering-errors.js";
import type { AgentSessions } from "./agent-sessions.js";
import {
  type PipelinedSession,
  type QueryAnswer,
  QueryFailedError,
  type QueryOptions,
  RowNotHeldError,
  SessionEndedError,
  type StatementResult,
} from "./pipelined-session.js";
import {
  BUDGET_EXCEEDED,
  pipelineQueryError,
  QueryError,
  RESULT_TOO_LARGE,
  RESULTS_MEMORY_FULL,
  ROW_TOO_LARGE,
} from "./query-errors.js";

export interface PipelinedQueryRequest {
  agentWallet: string;
  providerId: string;
  sql: string;
  params?: unknown[];
  /**
   * The agent's budget for this request (micro-USDC): an estimate above it is refused before anything runs, and
   * the statements stop where they would cost more (`pgtoll.max_query_cost`).
   */
  maxCostMicro?: bigint;
}

/** Why an answer's rows stop short of the result: the code and message of the limit that stopped them. */
export interface StoppedBy {
  code: string;
  message: string;
}

export interface PipelinedQueryResult {
  rows: Record<string, unknown>[];
  rowCount: number;
  estimatedCostMicro: bigint;
  actualCostMicro: bigint;
  /** The actual cost's parts, as `SHOW pgtoll.last_query_cost` gives them. */
  costParts: Record<string, unknown>;
  /** The rows stop short of the result: `stoppedBy` says why. */
  truncated: boolean;
  stoppedBy?: StoppedBy;
  executionMs: number;
}

export interface PipelinedQueryDeps {
  /** The guard's verdict on a SQL string, for the provider (the same the proxy applies). */
  check(sql: string): GuardVerdict;
  /** The agents' sessions with their providers. */
  sessions: AgentSessions;
  /** The provider's settings as of now (its pricing's version): sessions started with others are not used. */
  settingsVersion: string;
  /** What the request would cost by the planner's estimates (micro-USDC); 0 when it cannot be estimated. */
  estimate(request: PipelinedQueryRequest): Promise<bigint>;
  /** Where refused statements are counted for the provider's analytics. */
  refusals: RefusalTally;
  /** The statement timeout (PGTOLL_STATEMENT_TIMEOUT_MS), named in the answer of a statement it cancelled. */
  statementTimeoutMs: number;
  /** The process's result memory (PGTOLL_MAX_RESULTS_IN_MEMORY): every answer's rows are held in it. */
  resultMemory: ResultMemory;
}

/**
 * Statements that leave nothing behind in their session once their query is answered: a request made only of them
 * is pipelined onto the agent's shared sessions. Any other (transaction control, SET, PREPARE, a cursor, LISTEN)
 * runs on a session lent to it alone; with transaction control as well, the session is taken back after it, and
 * with any other it is closed.
 */
const STATELESS_COMMANDS = new Set([
  "SELECT",
  "INSERT",
  "UPDATE",
  "DELETE",
  "MERGE",
  "SHOW",
  "VALUES",
  "TABLE",
]);

/** The budget each shared session was last given (`pgtoll.max_query_cost`), as the text SET sends. */
const sessionBudgets = new WeakMap<PipelinedSession, string>();

const NO_BUDGET = "'none'";

/**
 * Runs a REST request's SQL through the statement pipeline, as the agent: as one query on its proxy session (with
 * `pgtoll.synchronous_charges` on, so the query's charge is written before its answer, which carries its cost).
 * The proxy guards, funds, bounds, meters and charges every statement as it does a wire client's; this turns the
 * request into a query and the answer into REST's.
 *
 * A result cut off by the agent's funds, its budget or a result cap is answered with the rows delivered before
 * the cut (each paid for), `truncated` and `stoppedBy`; a write cut off is rolled back and refused uncharged.
 */
export async function runPipelinedQuery(
  deps: PipelinedQueryDeps,
  request: PipelinedQueryRequest,
): Promise<PipelinedQueryResult> {
  const statements = allowedStatements(deps, request);
  // Planned alongside the run, unless a budget needs it first: an estimate above it runs nothing.
  const estimated =
    request.maxCostMicro === undefined
      ? deps.estimate(request)
      : await refuseOverBudget(deps, request, request.maxCostMicro);
  const pipelined = statements.every((statement) => STATELESS_COMMANDS.has(statement.command));
  const key = {
    wallet: request.agentWallet,
    providerId: request.providerId,
    settings: deps.settingsVersion,
  };
  const refused = sessionRefusal(deps, request.providerId);
  const session = pipelined
    ? await deps.sessions.session(key).catch(refused)
    : await deps.sessions.exclusive(key).catch(refused);
  const started = performance.now();
  let reusable = false;
  // Each answer's own size is capped in the proxy (pgtoll.max_result_bytes); this bounds them all together.
  const lease = deps.resultMemory.lease(Number.MAX_SAFE_INTEGER);
  const options = { holdRow: (bytes: number) => lease.add(bytes) === undefined };
  try {
    const budget = request.maxCostMicro === undefined ? NO_BUDGET : `'${formatMicro(request.maxCostMicro)}'`;
    const budgetSet =
      sessionBudgets.get(session) === budget ? undefined : settled(setBudget(session, budget));
    const values = request.params ?? (statements.length === 1 ? [] : undefined);
    const run = await runQuery(session, request.sql, values, options);
    const budgetOutcome = await budgetSet;
    if (budgetOutcome && !budgetOutcome.ok) throw answerOfError(budgetOutcome.error);
    reusable =
      run.ended &&
      statements.every(
        (statement) => statement.transactionControl || STATELESS_COMMANDS.has(statement.command),
      );
    const executionMs = performance.now() - started;
    const { error } = run;
    const answer = error === undefined ? run.answer : cutOffAnswer(error, statements);
    if (!answer) throw answerOfError(error, deps.statementTimeoutMs);
    const stoppedBy = error === undefined ? undefined : stopReason(error);
    return {
      ...rowsOf(answer),
      estimatedCostMicro: await estimated,
      actualCostMicro: run.cost.costMicro,
      costParts: run.cost.parts,
      truncated: stoppedBy !== undefined,
      ...(stoppedBy ? { stoppedBy } : {}),
      executionMs,
    };
  } finally {
    lease.release();
    if (!pipelined) {
      // Back to the agent's other queries only when its transaction ended and it changed nothing else.
      if (!reusable) session.close();
      deps.sessions.giveBack(key, session);
    }
  }
}

/** A promise's outcome, never rejected: the queries written together are each read, whatever the others did. */
type Settled<T> =
  | { ok: true; value: T; error?: undefined }
  | { ok: false; value?: undefined; error: unknown };

function settled<T>(promise: Promise<T>): Promise<Settled<T>> {
  return promise.then(
    (value) => ({ ok: true, value }),
    (error: unknown) => ({ ok: false, error }),
  );
}

interface Run {
  answer: QueryAnswer | undefined;
  error: unknown;
  cost: ChargedCost;
  /** The session is back outside a transaction. */
  ended: boolean;
}

/**
 * Runs the query on `session`. A transaction block it leaves open (only a request on a session lent to it alone
 * can) is ended after it, committed (rolled back when it failed), as the request's end: its cost is the query's
 * and that COMMIT's (a write in the block is charged as it completes, or with the COMMIT when the proxy wrapped
 * it).
 */
async function runQuery(
  session: PipelinedSession,
  sql: string,
  values: readonly unknown[] | undefined,
  options: QueryOptions,
): Promise<Run> {
  const { value: answer, error } = await settled(session.query(sql, values, options));
  // A row that could not be held closed the session: its refusal is the answer, nothing more is known.
  if (error instanceof RowNotHeldError || error instanceof SessionEndedError) throw answerOfError(error);
  const status = (answer ?? answerOf(error))?.transaction;
  const cost = reportedCost(answer ?? answerOf(error));
  if (status !== "T" && status !== "E") return { answer, error, cost, ended: status !== undefined };
  const ended = await settled(session.query(status === "T" ? "COMMIT" : "ROLLBACK"));
  if (!ended.ok) return { answer, error, cost, ended: false };
  const endCost = reportedCost(ended.value);
  return {
    answer,
    error,
    cost: { costMicro: cost.costMicro + endCost.costMicro, parts: addParts(cost, endCost) },
    ended: true,
  };
}

/** The answer a failed query carries (what completed before its error). */
function answerOf(error: unknown): QueryAnswer | undefined {
  return error instanceof QueryFailedError ? error.answer : undefined;
}

/** The request's statements, as the guard allows them; 400/403 when it refuses them (nothing runs). */
function allowedStatements(deps: PipelinedQueryDeps, request: PipelinedQueryRequest): GuardedStatement[] {
  const verdict = deps.check(request.sql);
  if (verdict.kind === "invalid") {
    deps.refusals.count(request.providerId, "policy", INVALID_SQL_RULE);
    throw new QueryError(400, `invalid SQL: ${verdict.message}`);
  }
  if (verdict.kind === "deny") {
    deps.refusals.count(request.providerId, "policy", verdict.rule);
    throw new QueryError(403, `SQL not allowed (${verdict.rule}): ${verdict.message}`);
  }
  if (request.params && request.params.length > 0 && verdict.statements.length !== 1)
    throw new QueryError(400, "params can only be used with a single statement");
  return verdict.statements;
}

/** 422 before anything runs when the planner's estimate of the request passes its budget; else the estimate. */
async function refuseOverBudget(
  deps: PipelinedQueryDeps,
  request: PipelinedQueryRequest,
  budgetMicro: bigint,
): Promise<bigint> {
  const estimated = await deps.estimate(request);
  if (estimated > budgetMicro)
    throw new QueryError(
      422,
      `over budget: the estimated cost ${formatMicro(estimated)} USDC is above maxCost ${formatMicro(budgetMicro)} USDC; nothing was run or charged`,
      BUDGET_EXCEEDED,
    );
  return estimated;
}

/** Sets the session's `pgtoll.max_query_cost` ahead of the query; the promise fails when the proxy refuses it. */
function setBudget(session: PipelinedSession, budget: string): Promise<void> {
  sessionBudgets.set(session, budget);
  return session.query(`SET pgtoll.max_query_cost = ${budget}`).then(
    () => undefined,
    (error: unknown) => {
      sessionBudgets.delete(session);
      throw error;
    },
  );
}

interface ChargedCost {
  costMicro: bigint;
  parts: Record<string, unknown>;
}

/**
 * What a query cost and its parts, as the proxy reports them with its answer to a REST session (the
 * `pgtoll.last_query_cost` ParameterStatus before its ReadyForQuery); nothing when it reported none.
 */
function reportedCost(answer: QueryAnswer | undefined): ChargedCost {
  const parts = JSON.parse(answer?.reported.get("pgtoll.last_query_cost") || "{}") as Record<string, unknown>;
  return { costMicro: parseMicro(String(parts.cost ?? "0")) ?? 0n, parts };
}

/** The parts of a query's cost and of the COMMIT that charged its writes, summed. */
function addParts(first: ChargedCost | undefined, second: ChargedCost | undefined): Record<string, unknown> {
  if (!first?.costMicro) return second?.parts ?? first?.parts ?? {};
  if (!second?.costMicro) return first.parts;
  const [a, b] = [first.parts, second.parts];
  const sum = (key: string) => Number(a[key] ?? 0) + Number(b[key] ?? 0);
  const money = (key: string) =>
    formatMicro((parseMicro(String(a[key] ?? "0")) ?? 0n) + (parseMicro(String(b[key] ?? "0")) ?? 0n));
  return {
    rows: sum("rows"),
    bytes: sum("bytes"),
    milliseconds: sum("milliseconds"),
    rowsCost: money("rowsCost"),
    bytesCost: money("bytesCost"),
    timeCost: money("timeCost"),
    minimumApplied: Boolean(a.minimumApplied) || Boolean(b.minimumApplied),
  };
}

/**
 * The answer of a read cut off by a limit after it delivered rows: those rows, paid for. Undefined when the error
 * is not such a cut-off, or the request writes (its writes were rolled back, and nothing of them charged).
 */
function cutOffAnswer(error: unknown, statements: readonly GuardedStatement[]): QueryAnswer | undefined {
  if (!(error instanceof QueryFailedError) || stoppedByCode(error) === undefined) return undefined;
  const { answer } = error;
  if (!answer.interrupted || statements.some((statement) => statement.writes)) return undefined;
  return { ...answer, statements: [...answer.statements, answer.interrupted] };
}

/** REST's code for a limit that cuts a result off; undefined for any other error. */
function stoppedByCode(error: QueryFailedError): string | undefined {
  switch (error.code) {
    case SqlState.insufficientFunds:
      return SqlState.insufficientFunds;
    case SqlState.budgetExceeded:
      return BUDGET_EXCEEDED;
    case SqlState.programLimitExceeded:
      if (error.message.startsWith(RESULT_TOO_LARGE_PREFIX)) return RESULT_TOO_LARGE;
      return error.message.startsWith(ROW_TOO_LARGE_PREFIX) ? ROW_TOO_LARGE : undefined;
    default:
      return undefined;
  }
}

/** The code and message of the limit that cut a result off. */
function stopReason(error: unknown): StoppedBy {
  const failed = error as QueryFailedError;
  return { code: stoppedByCode(failed) ?? failed.code ?? "", message: failed.message };
}

/** The rows of the last statement, and the rows of every statement counted (as node-postgres counts them). */
function rowsOf(answer: QueryAnswer): { rows: Record<string, unknown>[]; rowCount: number } {
  let rowCount = 0;
  let last: StatementResult | undefined;
  for (const statement of answer.statements) {
    rowCount += Math.max(statement.rows.length, statement.rowCount ?? 0);
    last = statement;
  }
  return { rows: last?.rows ?? [], rowCount };
}

/** The REST answer to a failed query (`timeoutMs`: the statement timeout, for a statement it cancelled). */
function answerOfError(error: unknown, timeoutMs?: number): Error {
  if (error instanceof RowNotHeldError) return new QueryError(503, MEMORY_FULL, RESULTS_MEMORY_FULL);
  if (error instanceof QueryFailedError) return pipelineQueryError(error.fields, timeoutMs);
  if (error instanceof SessionEndedError)
    return new QueryError(503, "the session running the query ended before its answer; try again");
  return error as Error;
}

const MEMORY_FULL =
  "pgtoll is busy: the results it holds for other requests fill its result memory (PGTOLL_MAX_RESULTS_IN_MEMORY); the result was cut off where it could not be held (the rows relayed before were charged). Try again shortly";

/** A session the proxy would not open for the agent: its refusal, as REST answers it, counted when for funds. */
function sessionRefusal(deps: PipelinedQueryDeps, providerId: string): (error: unknown) => never {
  return (error) => {
    if (error instanceof QueryFailedError && error.code === SqlState.insufficientFunds)
      deps.refusals.count(providerId, "funds", "insufficient-balance");
    throw answerOfError(error);
  };
}
