import type { FastifyInstance } from "fastify";
import { shapeText } from "../../analytics/shape-text.js";
import { topAgents } from "../../analytics/top-agents.js";
import { topStatements } from "../../analytics/top-statements.js";
import { checksumAddress } from "../../billing/address.js";
import { formatMicro } from "../../billing/money.js";
import { agentCursorParam, encodeAgentCursor, limitParam, rangeParams } from "../analytics-params.js";
import {
  AgentsAnswer,
  AgentsQuery,
  ProviderKeyHeaders,
  ProviderParams,
  StatementsAnswer,
  StatementsQuery,
} from "../analytics-schemas.js";
import type { GatewayContext } from "../context.js";
import { gatewayLimits } from "../plugins/rate-limit.js";
import { authenticatedProvider } from "../provider-key.js";
import { ErrorBody } from "../schemas.js";

const errors = { 400: ErrorBody, 401: ErrorBody, 404: ErrorBody };

/** GET /api/providers/:id/agents and /statements: who pays a provider most, and for what. */
export async function rankingRoutes(app: FastifyInstance, { ctx }: { ctx: GatewayContext }) {
  app.get<{
    Params: { id: string };
    Querystring: { from?: string; to?: string; limit?: string; cursor?: string };
  }>(
    "/api/providers/:id/agents",
    {
      config: { rateLimit: gatewayLimits.analytics },
      schema: {
        summary: "Agents ranked by what they spent over a range, a page at a time",
        tags: ["analytics"],
        params: ProviderParams,
        headers: ProviderKeyHeaders,
        querystring: AgentsQuery,
        response: { 200: AgentsAnswer, ...errors },
      },
    },
    async (request) => {
      const { id } = await authenticatedProvider(ctx, request, request.params.id);
      const range = rangeParams(request.query);
      const limit = limitParam(request.query.limit, 20);
      const cursor = agentCursorParam(request.query.cursor);
      const page = await topAgents(ctx.db, id, range, limit, cursor);
      return {
        providerId: id,
        from: range.from.toISOString(),
        to: range.to.toISOString(),
        agents: page.agents.map((agent) => ({
          wallet: checksumAddress(agent.wallet),
          spent: formatMicro(agent.spentMicro),
          statements: agent.statements,
          rows: agent.rows,
          balance: formatMicro(agent.balanceMicro),
          lastActive: agent.lastActive?.toISOString() ?? null,
        })),
        nextCursor: page.next ? encodeAgentCursor(page.next) : null,
      };
    },
  );

  app.get<{ Params: { id: string }; Querystring: { from?: string; to?: string; limit?: string } }>(
    "/api/providers/:id/statements",
    {
      config: { rateLimit: gatewayLimits.analytics },
      schema: {
        summary: "Statement shapes ranked by revenue over a range, proxy and REST alike",
        tags: ["analytics"],
        params: ProviderParams,
        headers: ProviderKeyHeaders,
        querystring: StatementsQuery,
        response: { 200: StatementsAnswer, ...errors },
      },
    },
    async (request) => {
      const { id } = await authenticatedProvider(ctx, request, request.params.id);
      const range = rangeParams(request.query);
      const limit = limitParam(request.query.limit, 10);
      const { shapes, unlisted } = await topStatements(ctx.db, id, range, limit);
      return {
        providerId: id,
        from: range.from.toISOString(),
        to: range.to.toISOString(),
        statements: shapes.map((shape) => ({
          fingerprint: shape.fingerprint,
          normalized: shapeText(shape.text ?? shape.sample),
          sample: shape.sample,
          calls: shape.calls,
          rows: shape.rows,
          revenue: formatMicro(shape.revenueMicro),
        })),
        otherShapes: {
          calls: unlisted.calls,
          rows: unlisted.rows,
          revenue: formatMicro(unlisted.revenueMicro),
        },
      };
    },
  );
}
