import type { FastifyInstance } from "fastify";
import { earningsSeries } from "../../analytics/earnings-series.js";
import { averageCostMicro, providerSummary, relativeChange } from "../../analytics/provider-summary.js";
import { refusalCounts } from "../../analytics/refusal-counts.js";
import { formatMicro } from "../../billing/money.js";
import { granularityParam, rangeParams } from "../analytics-params.js";
import {
  EarningsAnswer,
  EarningsQuery,
  ProviderKeyHeaders,
  ProviderParams,
  RangeQuery,
  RefusalsAnswer,
  SummaryAnswer,
} from "../analytics-schemas.js";
import type { GatewayContext } from "../context.js";
import { gatewayLimits } from "../plugins/rate-limit.js";
import { authenticatedProvider } from "../provider-key.js";
import { ErrorBody } from "../schemas.js";

const errors = { 400: ErrorBody, 401: ErrorBody, 404: ErrorBody };

/** GET /api/providers/:id/summary, /earnings and /refusals: a provider's figures, for its own key only. */
export async function analyticsRoutes(app: FastifyInstance, { ctx }: { ctx: GatewayContext }) {
  app.get<{ Params: { id: string }; Querystring: { from?: string; to?: string } }>(
    "/api/providers/:id/summary",
    {
      config: { rateLimit: gatewayLimits.analytics },
      schema: {
        summary: "Revenue, statements, rows and active agents over a range, with the period before it",
        tags: ["analytics"],
        params: ProviderParams,
        headers: ProviderKeyHeaders,
        querystring: RangeQuery,
        response: { 200: SummaryAnswer, ...errors },
      },
    },
    async (request) => {
      const { id } = await authenticatedProvider(ctx, request, request.params.id);
      const range = rangeParams(request.query);
      const { current, previous, previousRange } = await providerSummary(ctx.db, id, range);
      return {
        providerId: id,
        from: range.from.toISOString(),
        to: range.to.toISOString(),
        previousFrom: previousRange.from.toISOString(),
        previousTo: previousRange.to.toISOString(),
        revenue: compareMoney(current.revenueMicro, previous.revenueMicro),
        statements: compare(current.statements, previous.statements),
        rows: compare(current.rows, previous.rows),
        activeAgents: compare(current.agents, previous.agents),
        averageCostPerStatement: compareMoney(averageCostMicro(current), averageCostMicro(previous)),
      };
    },
  );

  app.get<{ Params: { id: string }; Querystring: { from?: string; to?: string; granularity?: string } }>(
    "/api/providers/:id/earnings",
    {
      config: { rateLimit: gatewayLimits.analytics },
      schema: {
        summary: "Revenue, statements, rows and agents per hour or day (UTC), empty buckets included",
        tags: ["analytics"],
        params: ProviderParams,
        headers: ProviderKeyHeaders,
        querystring: EarningsQuery,
        response: { 200: EarningsAnswer, ...errors },
      },
    },
    async (request) => {
      const { id } = await authenticatedProvider(ctx, request, request.params.id);
      const range = rangeParams(request.query);
      const granularity = granularityParam(request.query.granularity, range);
      const buckets = await earningsSeries(ctx.db, id, range, granularity);
      return {
        providerId: id,
        from: range.from.toISOString(),
        to: range.to.toISOString(),
        granularity,
        buckets: buckets.map((bucket) => ({
          start: bucket.start.toISOString(),
          revenue: formatMicro(bucket.revenueMicro),
          statements: bucket.statements,
          rows: bucket.rows,
          agents: bucket.agents,
        })),
      };
    },
  );

  app.get<{ Params: { id: string }; Querystring: { from?: string; to?: string } }>(
    "/api/providers/:id/refusals",
    {
      config: { rateLimit: gatewayLimits.analytics },
      schema: {
        summary: "Statements refused, by policy rule and by the agent's funds",
        tags: ["analytics"],
        params: ProviderParams,
        headers: ProviderKeyHeaders,
        querystring: RangeQuery,
        response: { 200: RefusalsAnswer, ...errors },
      },
    },
    async (request) => {
      const { id } = await authenticatedProvider(ctx, request, request.params.id);
      const range = rangeParams(request.query);
      const counts = await refusalCounts(ctx.db, id, range);
      return {
        providerId: id,
        from: range.from.toISOString(),
        to: range.to.toISOString(),
        total: counts.reduce((sum, count) => sum + count.refusals, 0),
        byRule: counts
          .filter((count) => count.kind === "policy")
          .map(({ rule, refusals }) => ({ rule, refusals })),
        byFunds: counts
          .filter((count) => count.kind === "funds")
          .map(({ rule, refusals }) => ({ reason: rule, refusals })),
      };
    },
  );
}

function compare(current: number, previous: number) {
  return { current, previous, change: relativeChange(current, previous) };
}

/** {@link compare} for money: the amounts as the gateway's 6-decimal strings, the change computed exactly. */
function compareMoney(currentMicro: bigint, previousMicro: bigint) {
  return {
    current: formatMicro(currentMicro),
    previous: formatMicro(previousMicro),
    change: relativeChange(currentMicro, previousMicro),
  };
}
