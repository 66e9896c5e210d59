import { Type } from "@sinclair/typebox";
import type { FastifyInstance } from "fastify";
import { listedForDiscovery } from "../../catalog/listing-store.js";
import { bazaarExtension, resourceServiceMetadata } from "../../x402/bazaar.js";
import { networkOf, paymentRequirements, X402_VERSION } from "../../x402/payment-terms.js";
import type { GatewayContext } from "../context.js";
import { HttpError } from "../plugins/errors.js";
import { ErrorBody } from "../schemas.js";

const DiscoveryQuery = Type.Object(
  {
    type: Type.Optional(Type.String({ maxLength: 20 })),
    payTo: Type.Optional(Type.String({ maxLength: 42 })),
    scheme: Type.Optional(Type.String({ maxLength: 20 })),
    network: Type.Optional(Type.String({ maxLength: 40 })),
    extensions: Type.Optional(Type.String({ maxLength: 40 })),
    limit: Type.Optional(Type.String({ maxLength: 4 })),
    offset: Type.Optional(Type.String({ maxLength: 7 })),
  },
  { additionalProperties: false },
);

const Open = Type.Object({}, { additionalProperties: true });
const DiscoveryPage = Type.Object({
  x402Version: Type.Integer(),
  items: Type.Array(
    Type.Object({
      resource: Type.String({ description: "the endpoint's URL" }),
      type: Type.String(),
      x402Version: Type.Integer(),
      accepts: Type.Array(Open),
      lastUpdated: Type.String(),
      metadata: Open,
      extensions: Open,
    }),
  ),
  pagination: Type.Object({ limit: Type.Integer(), offset: Type.Integer(), total: Type.Integer() }),
});

function count(value: string | undefined, fallback: number, max: number, name: string): number {
  if (value === undefined) return fallback;
  const parsed = Number(value);
  if (!/^\d+$/.test(value) || parsed > max)
    throw new HttpError(400, `invalid ${name}: expected a whole number from 0 to ${max}`);
  return parsed;
}

/**
 * `GET /discovery/resources`: the x402 discovery list of a facilitator (bazaar spec), for pgtoll's own paid
 * endpoints: one item per listed provider's query endpoint, with its payment terms (the minimum top-up) and its
 * bazaar declaration, the same one its 402s carry. Served when x402 is on.
 */
export async function discoveryRoutes(app: FastifyInstance, { ctx }: { ctx: GatewayContext }) {
  const x402 = ctx.x402;
  if (!x402) return;
  app.get<{ Querystring: typeof DiscoveryQuery.static }>(
    "/discovery/resources",
    {
      schema: {
        summary: "x402 discovery: the paid query endpoints of listed providers",
        tags: ["catalog"],
        querystring: DiscoveryQuery,
        response: { 200: DiscoveryPage, 400: ErrorBody },
      },
    },
    async (request) => {
      const query = request.query;
      const limit = count(query.limit, 20, 100, "limit") || 20;
      const offset = count(query.offset, 0, 1_000_000, "offset");
      const empty = { x402Version: X402_VERSION, items: [], pagination: { limit, offset, total: 0 } };
      // Every item is an HTTP endpoint paid with `exact` on pgtoll's one network, declaring bazaar.
      if (
        (query.type !== undefined && query.type !== "http") ||
        (query.scheme !== undefined && query.scheme !== "exact") ||
        (query.network !== undefined && query.network !== networkOf(x402.terms)) ||
        (query.extensions !== undefined && query.extensions !== "bazaar")
      )
        return empty;
      const page = await listedForDiscovery(ctx.db, { limit, offset, payTo: query.payTo });
      const url = `${request.protocol}://${request.host}/api/query`;
      return {
        x402Version: X402_VERSION,
        items: page.items.map((item) => ({
          resource: url,
          type: "http",
          x402Version: X402_VERSION,
          accepts: [paymentRequirements(x402.terms, item.walletAddress, x402.terms.minTopupMicro)],
          lastUpdated: item.updatedAt.toISOString(),
          metadata: {
            providerId: item.providerId,
            description:
              item.description || `SQL on the database of provider ${item.providerId}, charged per row`,
            ...resourceServiceMetadata(item),
            profile: `${request.protocol}://${request.host}/api/providers/${item.providerId}`,
          },
          extensions: { bazaar: bazaarExtension(item) },
        })),
        pagination: { limit, offset, total: page.total },
      };
    },
  );
}
