import type { FastifyInstance } from "fastify";
import type pg from "pg";
import { ChargeWriter } from "../../billing/charge-writer.js";
import { isRowsOnly } from "../../billing/cost.js";
import { costParts } from "../../billing/cost-parts.js";
import { formatMicro, numberToMicro, parseMicro } from "../../billing/money.js";
import { findListedSummary } from "../../catalog/listing-store.js";
import { ProviderGuards } from "../../guard/provider-guards.js";
import { standardPolicy } from "../../guard/standard-policy.js";
import { StatementShapes } from "../../guard/statement-shape.js";
import { createVerdictCache } from "../../guard/verdict-cache.js";
import { ProviderCache } from "../../providers/provider-cache.js";
import { type AcceptedPayment, acceptPayment } from "../../x402/accept-payment.js";
import { queryTopUpMicro } from "../../x402/payment-terms.js";
import { agentAuthentication } from "../agent-auth.js";
import type { GatewayContext } from "../context.js";
import { EstimateCache } from "../estimate-cache.js";
import { HeldFunds } from "../held-funds.js";
import { estimateCostMicro, type MeteredQueryDeps, runMeteredQuery } from "../metered-query.js";
import { HttpError } from "../plugins/errors.js";
import { gatewayLimits } from "../plugins/rate-limit.js";
import { QueryError } from "../query-errors.js";
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
 * Rows' worth of an agent's balance reserved at a time while several of its queries run at once (held-funds.ts);
 * what is not spent is released when the last of them ends.
 */
const RESERVE_ROWS = 1000;

/** POST /api/query: metered SQL over HTTP (see metered-query.ts for the rules). */
export async function queryRoutes(app: FastifyInstance, { ctx }: { ctx: GatewayContext }) {
  const authenticate = agentAuthentication(ctx);
  const providers = new ProviderCache(ctx.db);
  // Every answer waits for its charge's commit, so batches are not held back to gather more: each takes what
  // queued while the one before was written (group commit). The wire proxy's writer, whose windows nobody
  // waits for, does gather (measured with 10 connections: 2 141 req/s with a 25 ms gather, 4 673 without).
  const writer = new ChargeWriter(ctx.db, {
    ttlSeconds: ctx.config.reservationTtlSeconds,
    batchIntervalMs: 0,
    onBatchWritten: (seconds) => ctx.metrics.ledger.observeBatch("rest", seconds),
    onError: (error, charge) =>
      ctx.logger.error(
        { err: error, reservationId: charge.reservationId },
        "a query charge could not be written",
      ),
  });
  ctx.metrics.ledger.watchWriter("rest", writer);
  const funds = new HeldFunds({
    ledger: ctx.db,
    writer,
    reservationTtlSeconds: ctx.config.reservationTtlSeconds,
    ...(ctx.limits ? { limits: ctx.limits } : {}),
    onReleaseError: (error) =>
      ctx.logger.warn({ err: error }, "a held reservation could not be released; it will expire"),
  });
  app.addHook("onClose", async () => {
    await funds.closeAll();
    await writer.flush();
  });
  const shared: Omit<MeteredQueryDeps, "upstream" | "reader"> = {
    check: createVerdictCache(ctx.policy),
    funds,
    estimates: new EstimateCache(),
    reserveRows: RESERVE_ROWS,
    rowCap: ctx.config.rowCap,
    maxResultBytes: ctx.config.maxResultBytes,
    resultMemory: ctx.upstream.resultMemory,
    statementTimeoutMs: ctx.config.statementTimeoutMs,
    refusals: ctx.metrics.refusals,
    shapes: new StatementShapes(),
    ledger: ctx.db,
  };
  // Agents of a read-only provider are also held to the read-only rule (nothing may switch to read-write), and
  // those of a provider with table prices to its priced tables' rules.
  const guards = new ProviderGuards(ctx.policy ?? standardPolicy, shared.check);
  // One per provider pool, made once (again when the provider's guard changes with its pricing): copying the
  // shared part into a new object on every request costs more.
  const depsByPool = new WeakMap<pg.Pool, MeteredQueryDeps>();
  const depsFor = (
    upstream: pg.Pool,
    reader: pg.Pool,
    check: MeteredQueryDeps["check"],
  ): MeteredQueryDeps => {
    let deps = depsByPool.get(upstream);
    if (deps?.check !== check) {
      deps = { ...shared, upstream, reader, check };
      depsByPool.set(upstream, deps);
    }
    return deps;
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
      const { readOnly } = found.pricing;
      const deps = depsFor(
        ctx.upstream.get(found.provider, readOnly),
        ctx.upstream.get(found.provider, true),
        guards.checkFor(found.pricing),
      );
      const query = {
        agentWallet,
        providerId,
        sql: request.body.sql,
        params: request.body.params,
        price: found.pricing.price,
        limits: found.pricing,
        maxCostMicro: maxCostParam(request.body.maxCost),
      };
      const offer = async (costMicro?: bigint): Promise<PaymentOffer | undefined> =>
        ctx.x402 && {
          terms: ctx.x402.terms,
          payTo: found.provider.walletAddress,
          amountMicro: queryTopUpMicro(ctx.x402.terms, costMicro ?? (await estimateCostMicro(deps, query))),
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
        const result = await runMeteredQuery(deps, query);
        ok.inc();
        rowsMetered.inc(result.rowCount);
        chargedMicro.inc(Number(result.actualCostMicro));
        // As the ledger counts it: a request that cost nothing left no entry.
        if (result.actualCostMicro > 0n)
          ctx.metrics.earnings.add(providerId, "rest", 1, result.rowCount, result.actualCostMicro);
        return {
          rows: result.rows,
          rowCount: result.rowCount,
          estimatedCost: formatMicro(result.estimatedCostMicro),
          actualCost: formatMicro(result.actualCostMicro),
          executionTime: `${result.executionMs.toFixed(2)}ms`,
          // Only what the request or the price asks for: a rows-only answer stays as the spec shows it.
          ...(query.maxCostMicro === undefined ? {} : { truncated: result.truncated }),
          ...(isRowsOnly(query.price) ? {} : { costBreakdown: costParts(result.cost) }),
        };
      } catch (error) {
        let answer = error;
        if (error instanceof QueryError) {
          ctx.metrics.queries.labels("rest", OUTCOME_BY_STATUS[error.statusCode] ?? "failed").inc();
          const payable = error.statusCode === 402 && !paid ? await offer(error.costMicro) : undefined;
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
