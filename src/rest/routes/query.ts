import type { FastifyInstance } from "fastify";
import { formatMicro } from "../../billing/money.js";
import { findProviderForQuery } from "../../providers/registry.js";
import { authenticateAgent } from "../agent-auth.js";
import type { GatewayContext } from "../context.js";
import { runMeteredQuery } from "../metered-query.js";
import { HttpError } from "../plugins/errors.js";
import { gatewayLimits } from "../plugins/rate-limit.js";
import { QueryError } from "../query-errors.js";
import { ErrorBody, QueryBody, QueryResult } from "../schemas.js";
import { uuidParam, walletParam } from "../validate.js";

const OUTCOME_BY_STATUS: Record<number, string> = {
  400: "invalid",
  402: "insufficient_funds",
  403: "denied",
  404: "not_found",
};

/** POST /api/query: metered SQL over HTTP (see metered-query.ts for the rules). */
export async function queryRoutes(app: FastifyInstance, { ctx }: { ctx: GatewayContext }) {
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
          400: ErrorBody,
          402: ErrorBody,
          403: ErrorBody,
          404: ErrorBody,
          500: ErrorBody,
        },
      },
    },
    async (request) => {
      const agentWallet = walletParam(request.body.agentWallet, "agentWallet");
      const providerId = uuidParam(request.body.providerId, "providerId");
      await authenticateAgent(ctx, request, agentWallet, providerId);
      const found = await findProviderForQuery(ctx.db, providerId);
      if (!found) throw new HttpError(404, `provider ${providerId} not found`);
      if (!found.pricing) throw new HttpError(404, `provider ${providerId} has no pricing yet`);
      try {
        const result = await runMeteredQuery(
          {
            ledger: ctx.db,
            upstream: ctx.upstream.get(found.provider),
            policy: ctx.policy,
            rowCap: ctx.config.rowCap,
            statementTimeoutMs: ctx.config.statementTimeoutMs,
            reservationTtlSeconds: ctx.config.reservationTtlSeconds,
          },
          {
            agentWallet,
            providerId,
            sql: request.body.sql,
            params: request.body.params,
            price: found.pricing,
          },
        );
        ctx.metrics.queries.labels("rest", "ok").inc();
        ctx.metrics.rowsMetered.labels("rest").inc(result.rowCount);
        ctx.metrics.chargedMicro.labels("rest").inc(Number(result.actualCostMicro));
        return {
          rows: result.rows,
          rowCount: result.rowCount,
          estimatedCost: formatMicro(result.estimatedCostMicro),
          actualCost: formatMicro(result.actualCostMicro),
          executionTime: `${result.executionMs.toFixed(2)}ms`,
        };
      } catch (error) {
        if (error instanceof QueryError) {
          ctx.metrics.queries.labels("rest", OUTCOME_BY_STATUS[error.statusCode] ?? "failed").inc();
          throw new HttpError(error.statusCode, error.message);
        }
        ctx.metrics.queries.labels("rest", "failed").inc();
        throw error;
      }
    },
  );
}
