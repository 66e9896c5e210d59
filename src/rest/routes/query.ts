import type { FastifyInstance } from "fastify";
import { isRowsOnly } from "../../billing/cost.js";
import { formatMicro, numberToMicro, parseMicro } from "../../billing/money.js";
import { findListedSummary } from "../../catalog/listing-store.js";
import { ProviderGuards } from "../../guard/provider-guards.js";
import { standardPolicy } from "../../guard/standard-policy.js";
import { createVerdictCache } from "../../guard/verdict-cache.js";
import { jsonSafeTypes } from "../../providers/json-safe-types.js";
import { type PricedProvider, ProviderCache } from "../../providers/provider-cache.js";
import type { AuthenticatedAgent } from "../../proxy/agent-session.js";
import { type AcceptedPayment, acceptPayment } from "../../x402/accept-payment.js";
import { queryTopUpMicro } from "../../x402/payment-terms.js";
import { agentAuthentication } from "../agent-auth.js";
import { AgentSessions } from "../agent-sessions.js";
import type { GatewayContext } from "../context.js";
import { EstimateCache } from "../estimate-cache.js";
import { type PipelinedQueryDeps, runPipelinedQuery } from "../pipelined-query.js";
import { HttpError } from "../plugins/errors.js";
import { gatewayLimits } from "../plugins/rate-limit.js";
import { QueryError } from "../query-errors.js";
import { quoteQuery } from "../query-quote.js";
import { ErrorBody, PaymentRequiredBody, QueryBody, QueryErrorBody, QueryResult } from "../schemas.js";
import { uuidParam, walletParam } from "../validate.js";
import {
  afterPayment,
  orRefusal,
  type PaymentOffer,
  paymentRequiredError,
  paymentResponseHeaders,
  paymentSignature,
} from "../x402-answers.js";

const OUTCOME_BY_STATUS: Record<number, string> = {
  400: "invalid",
  402: "insufficient_funds",
  403: "denied",
  404: "not_found",
  422: "over_budget",
};

/** The request's `maxCost` (USDC, a decimal string or a JSON number) in micro-USDC; 400 when malformed. */
function maxCostParam(value: string | number | undefined): bigint | undefined {
  if (value === undefined) return undefined;
  const micro = typeof value === "number" ? numberToMicro(value) : parseMicro(value.trim());
  if (micro === null || micro < 0n)
    throw new HttpError(
      400,
      'invalid maxCost: expected a USDC amount of at least 0 with at most 6 decimals, e.g. "0.05"',
    );
  return micro;
}

/**
 * Most proxy sessions one agent's queries to one provider are pipelined onto in this process: one. Each session
 * holds part of the agent's balance, so a second one would compete with the first for it (and be refused while
 * the first holds it all); pipelined, one session keeps its upstream backend busy.
 */
const SESSIONS_PER_AGENT = 1;
/**
 * An agent's session with no query for this long is closed, and its upstream connection with it: one agent's
 * session is cheap to open again, but a thousand agents' idle ones would hold a thousand connections.
 */
const SESSION_IDLE_MS = 1000;
/** An agent's session is replaced after this long: what a session checks as it starts is checked again. */
const SESSION_MAX_AGE_MS = 60_000;

/** POST /api/query: metered SQL over HTTP, run through the wire proxy's statement pipeline (pipelined-query.ts). */
export async function queryRoutes(app: FastifyInstance, { ctx }: { ctx: GatewayContext }) {
  const authenticate = agentAuthentication(ctx);
  const providers = new ProviderCache(ctx.db);
  const proxy = ctx.proxy;
  const connect = (agent?: AuthenticatedAgent) => {
    if (!proxy?.connect)
      throw new QueryError(503, "pgtoll's statement pipeline is not running; try again shortly");
    return proxy.connect(agent);
  };
  const sessions = new AgentSessions({
    connect: (agent) => connect({ ...agent, surface: "rest" }),
    perAgent: SESSIONS_PER_AGENT,
    idleMs: SESSION_IDLE_MS,
    maxAgeMs: SESSION_MAX_AGE_MS,
    // Each query's charge is written before its answer: the REST spec's rule.
    settings: {
      "pgtoll.synchronous_charges": "on",
      // REST's answers are read whole into memory: capped as they arrive, in the proxy, before they are charged.
      "pgtoll.max_result_rows": String(ctx.config.rowCap),
      "pgtoll.max_result_bytes": String(ctx.config.maxResultBytes),
    },
    types: jsonSafeTypes,
  });
  app.addHook("onClose", async () => sessions.closeAll());
  const check = createVerdictCache(ctx.policy);
  const estimates = new EstimateCache();
  // Agents of a read-only provider are also held to the read-only rule (nothing may switch to read-write), and
  // those of a provider with table prices to its priced tables' rules.
  const guards = new ProviderGuards(ctx.policy ?? standardPolicy, check);
  const depsFor = (found: PricedProvider): PipelinedQueryDeps => {
    const providerCheck = guards.checkFor(found.pricing);
    return {
      check: providerCheck,
      sessions,
      settingsVersion: `${found.pricing.id}@${found.pricing.updatedAt.getTime()}`,
      estimate: (request) =>
        quoteQuery(
          {
            check: providerCheck,
            estimates,
            reader: ctx.upstream.get(found.provider, true),
            statementTimeoutMs: ctx.config.statementTimeoutMs,
          },
          { ...request, price: found.pricing.price },
        ).then(
          (quote) => (quote.allowed ? quote.estimatedCostMicro : 0n),
          () => 0n,
        ),
      refusals: ctx.metrics.refusals,
      statementTimeoutMs: ctx.config.statementTimeoutMs,
      resultMemory: ctx.upstream.resultMemory,
    };
  };
  /** A listed provider's summary for its 402s' bazaar declaration; none when unlisted or unreadable. */
  const listingOf = async (providerId: string) => {
    const listing = await findListedSummary(ctx.db, providerId).catch(() => null);
    return listing ? { listing } : {};
  };
  const ok = ctx.metrics.queries.summed({ surface: "rest", outcome: "ok" });
  const rowsMetered = ctx.metrics.rowsMetered.summed({ surface: "rest" });
  const chargedMicro = ctx.metrics.chargedMicro.summed({ surface: "rest" });

  app.post<{ Body: QueryBody }>(
    "/api/query",
    {
      config: { rateLimit: gatewayLimits.query },
      schema: {
        summary: "Run SQL on a provider's database, charged per row",
        tags: ["agents"],
        body: QueryBody,
        response: {
          200: QueryResult,
          400: QueryErrorBody,
          402: PaymentRequiredBody,
          403: QueryErrorBody,
          404: ErrorBody,
          422: QueryErrorBody,
          500: QueryErrorBody,
          503: QueryErrorBody,
        },
      },
    },
    async (request, reply) => {
      const agentWallet = walletParam(request.body.agentWallet, "agentWallet");
      const providerId = uuidParam(request.body.providerId, "providerId");
      const payment = ctx.x402 ? paymentSignature(request) : undefined;
      // A payment proves the wallet as an agent token does: its EIP-712 signature is checked before anything runs.
      if (!payment) await authenticate(request, agentWallet, providerId);
      const found = await providers.find(providerId);
      if (!found) throw new HttpError(404, `provider ${providerId} not found`);
      if (!found.pricing) throw new HttpError(404, `provider ${providerId} has no pricing yet`);
      const deps = depsFor({ provider: found.provider, pricing: found.pricing });
      const query = {
        agentWallet,
        providerId,
        sql: request.body.sql,
        params: request.body.params,
        maxCostMicro: maxCostParam(request.body.maxCost),
      };
      const offer = async (costMicro?: bigint): Promise<PaymentOffer | undefined> =>
        ctx.x402 && {
          terms: ctx.x402.terms,
          payTo: found.provider.walletAddress,
          amountMicro: queryTopUpMicro(ctx.x402.terms, costMicro ?? (await deps.estimate(query))),
          request,
          description: `SQL on the database of provider ${providerId}, charged per row`,
          ...(await listingOf(providerId)),
        };

      let paid: AcceptedPayment | undefined;
      if (ctx.x402 && payment && deps.check(query.sql).kind === "allow") {
        const payable = (await offer()) as PaymentOffer;
        const gateway = ctx.x402;
        paid = await orRefusal(payable, () =>
          acceptPayment(gateway, {
            header: payment,
            agentWallet,
            providerId,
            payTo: found.provider.walletAddress,
            minimumMicro: payable.amountMicro,
          }),
        );
        ctx.metrics.depositsCredited.inc();
        ctx.metrics.depositedMicro.inc(Number(paid.amountMicro));
        reply.headers(paymentResponseHeaders(paid.settlement));
      }
      try {
        const result = await runPipelinedQuery(deps, query);
        ok.inc();
        rowsMetered.inc(result.rowCount);
        chargedMicro.inc(Number(result.actualCostMicro));
        return {
          rows: result.rows,
          rowCount: result.rowCount,
          estimatedCost: formatMicro(result.estimatedCostMicro),
          actualCost: formatMicro(result.actualCostMicro),
          executionTime: `${result.executionMs.toFixed(2)}ms`,
          // Only what the request or the price asks for: a rows-only answer stays as the spec shows it.
          ...(query.maxCostMicro === undefined && !result.truncated ? {} : { truncated: result.truncated }),
          ...(result.stoppedBy ? { stoppedBy: result.stoppedBy } : {}),
          ...(isRowsOnly(found.pricing.price) ? {} : { costBreakdown: result.costParts }),
        };
      } catch (error) {
        let answer = error;
        if (error instanceof QueryError) {
          ctx.metrics.queries.labels("rest", OUTCOME_BY_STATUS[error.statusCode] ?? "failed").inc();
          const payable = error.statusCode === 402 && !paid ? await offer() : undefined;
          answer = payable
            ? paymentRequiredError(payable, `${error.message}, or pay for it with x402 (PAYMENT-REQUIRED)`)
            : new HttpError(error.statusCode, error.message, error.sqlState);
        } else {
          ctx.metrics.queries.labels("rest", "failed").inc();
        }
        if (paid)
          answer = afterPayment(
            answer,
            paid.settlement,
            `the payment of ${formatMicro(paid.amountMicro)} USDC was credited: balance ${formatMicro(paid.entry.balanceAfterMicro)}`,
          );
        throw answer;
      }
    },
  );
}
