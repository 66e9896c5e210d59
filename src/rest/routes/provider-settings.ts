import { performance } from "node:perf_hooks";
import type { FastifyInstance } from "fastify";
import { findPricing } from "../../providers/registry.js";
import {
  DatabaseCheckAnswer,
  ProviderAccountAnswer,
  ProviderKeyHeaders,
  ProviderParams,
} from "../analytics-schemas.js";
import type { GatewayContext } from "../context.js";
import { HttpError } from "../plugins/errors.js";
import { gatewayLimits } from "../plugins/rate-limit.js";
import { presentPricing } from "../present.js";
import { authenticatedProvider } from "../provider-key.js";
import { ErrorBody, Pricing } from "../schemas.js";
import { uuidParam } from "../validate.js";

const errors = { 400: ErrorBody, 401: ErrorBody, 404: ErrorBody };

/**
 * GET /api/providers/:id/pricing (public: agents read prices before they query), /account and /database (the
 * provider's key): what the console shows of a provider's settings.
 */
export async function providerSettingsRoutes(app: FastifyInstance, { ctx }: { ctx: GatewayContext }) {
  app.get<{ Params: { id: string } }>(
    "/api/providers/:id/pricing",
    {
      config: { rateLimit: gatewayLimits.analytics },
      schema: {
        summary: "A provider's pricing and the limits it sets on agents (no key needed)",
        tags: ["providers"],
        params: ProviderParams,
        // Public: no key is asked for, so none is refused.
        response: { 200: Pricing, 400: ErrorBody, 404: ErrorBody },
      },
    },
    async (request) => {
      const id = uuidParam(request.params.id, "provider id");
      const pricing = await findPricing(ctx.db, id);
      if (!pricing) throw new HttpError(404, `provider ${id} has no pricing yet`);
      return presentPricing(pricing);
    },
  );

  app.get<{ Params: { id: string } }>(
    "/api/providers/:id/account",
    {
      config: { rateLimit: gatewayLimits.analytics },
      schema: {
        summary: "The provider's registration: name, email and wallet (never its connection string or key)",
        tags: ["providers"],
        params: ProviderParams,
        headers: ProviderKeyHeaders,
        response: { 200: ProviderAccountAnswer, ...errors },
      },
    },
    async (request) => {
      const provider = await authenticatedProvider(ctx, request, request.params.id);
      return {
        providerId: provider.id,
        name: provider.name,
        email: provider.email,
        walletAddress: provider.walletAddress,
        createdAt: provider.createdAt.toISOString(),
      };
    },
  );

  app.get<{ Params: { id: string } }>(
    "/api/providers/:id/database",
    {
      config: { rateLimit: gatewayLimits.analytics },
      schema: {
        summary: "Whether the provider's registered database answers now, and how fast",
        tags: ["providers"],
        params: ProviderParams,
        headers: ProviderKeyHeaders,
        response: { 200: DatabaseCheckAnswer, ...errors },
      },
    },
    async (request) => {
      const provider = await authenticatedProvider(ctx, request, request.params.id);
      const started = performance.now();
      // The read-only pool: the check is one SELECT 1 as the agents' sessions would run it.
      const outcome = await ctx.upstream
        .get(provider, true)
        .query("SELECT 1")
        .then(
          () => ({ reachable: true, error: null }),
          (error: Error) => ({ reachable: false, error: error.message }),
        );
      const latencyMs = Math.round((performance.now() - started) * 100) / 100;
      return {
        providerId: provider.id,
        ...outcome,
        latencyMs: outcome.reachable ? latencyMs : null,
        checkedAt: new Date().toISOString(),
      };
    },
  );
}
