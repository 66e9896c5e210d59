import { Type } from "@sinclair/typebox";
import type { FastifyInstance } from "fastify";
import { PricingError, parseAgentLimits, parsePriceDimensions, parsePricing } from "../../billing/pricing.js";
import { parseTableName } from "../../guard/relation-names.js";
import { providerHostsIn } from "../../providers/provider-hosts.js";
import { type ProviderRoleCheck, privilegedRoleMessage } from "../../providers/provider-role.js";
import {
  DuplicateProviderError,
  type PricingSettings,
  registerProvider,
  setPricing,
  UpstreamConnectionError,
  verifyConnectionString,
} from "../../providers/registry.js";
import type { GatewayContext } from "../context.js";
import { HttpError } from "../plugins/errors.js";
import { presentPricing, presentProvider } from "../present.js";
import { authenticatedProvider } from "../provider-key.js";
import { ErrorBody, Pricing, PricingBody, Provider, RegisterBody } from "../schemas.js";
import { emailParam, walletParam } from "../validate.js";

/** POST /api/providers/register and POST /api/providers/:id/pricing. */
export async function providerRoutes(app: FastifyInstance, { ctx }: { ctx: GatewayContext }) {
  app.post<{ Body: RegisterBody }>(
    "/api/providers/register",
    {
      schema: {
        summary: "Register a provider database",
        tags: ["providers"],
        body: RegisterBody,
        response: {
          201: Type.Object({ provider: Provider, apiKey: Type.String() }),
          400: ErrorBody,
          409: ErrorBody,
        },
      },
    },
    async (request, reply) => {
      const name = request.body.name.trim();
      if (!name) throw new HttpError(400, "invalid name: must not be blank");
      const email = emailParam(request.body.email);
      const walletAddress = walletParam(request.body.walletAddress, "walletAddress");
      const { connectionString } = request.body;
      let roleCheck: ProviderRoleCheck;
      try {
        roleCheck = await verifyConnectionString(connectionString, providerHostsIn(ctx.config));
      } catch (error) {
        if (error instanceof UpstreamConnectionError)
          throw new HttpError(400, `invalid connectionString: ${error.message}`);
        throw error;
      }
      if (roleCheck.privilegedRights.length > 0) {
        if (!ctx.config.allowPrivilegedProviderRoles)
          throw new HttpError(400, `invalid connectionString: ${privilegedRoleMessage(roleCheck)}`);
        request.log.warn(
          { role: roleCheck.role, rights: roleCheck.privilegedRights },
          "a provider registered a privileged role (PGTOLL_ALLOW_PRIVILEGED_PROVIDER_ROLES=on): its agents run with these rights",
        );
      }
      try {
        const { provider, apiKey } = await registerProvider(ctx.db, ctx.box, {
          name,
          email,
          walletAddress,
          connectionString,
        });
        request.log.info({ providerId: provider.id }, "provider registered");
        return reply.code(201).send({ provider: presentProvider(provider), apiKey });
      } catch (error) {
        if (error instanceof DuplicateProviderError) throw new HttpError(409, error.message);
        throw error;
      }
    },
  );

  app.post<{ Params: { id: string }; Body: PricingBody }>(
    "/api/providers/:id/pricing",
    {
      schema: {
        summary: "Set or update a provider's pricing",
        tags: ["providers"],
        params: Type.Object({ id: Type.String() }),
        headers: Type.Object({ "x-api-key": Type.Optional(Type.String()) }),
        body: PricingBody,
        response: { 200: Pricing, 400: ErrorBody, 401: ErrorBody, 404: ErrorBody },
      },
      // Before the schema: its generic "body/readOnly must be boolean" would not say that the pricing is wrong.
      preValidation: async (request) => {
        const body = request.body as Record<string, unknown> | null | undefined;
        if (body?.readOnly !== undefined && typeof body.readOnly !== "boolean")
          throw new HttpError(400, "invalid pricing: readOnly must be true or false");
        if (body?.allowRowFolding !== undefined && typeof body.allowRowFolding !== "boolean")
          throw new HttpError(400, "invalid pricing: allowRowFolding must be true or false");
        try {
          if (body && typeof body === "object") {
            parseAgentLimits(body);
            parsePriceDimensions(body, parseTableName);
          }
        } catch (error) {
          if (error instanceof PricingError) throw new HttpError(400, `invalid pricing: ${error.message}`);
          throw error;
        }
      },
    },
    async (request) => {
      const providerId = (await authenticatedProvider(ctx, request, request.params.id)).id;
      let price: ReturnType<typeof parsePricing>;
      let settings: PricingSettings;
      try {
        price = {
          ...parsePricing(request.body.basePricePer1000Rows, request.body.markupMultiplier),
          ...parsePriceDimensions(request.body, parseTableName),
        };
        settings = {
          readOnly: request.body.readOnly,
          allowRowFolding: request.body.allowRowFolding,
          ...parseAgentLimits(request.body),
        };
      } catch (error) {
        if (error instanceof PricingError) throw new HttpError(400, `invalid pricing: ${error.message}`);
        throw error;
      }
      return presentPricing(await setPricing(ctx.db, providerId, price, settings));
    },
  );
}
