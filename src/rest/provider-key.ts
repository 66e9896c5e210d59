import type { FastifyRequest } from "fastify";
import { apiKeyMatches } from "../providers/api-key.js";
import { findProvider, type ProviderWithSecrets } from "../providers/registry.js";
import type { GatewayContext } from "./context.js";
import { HttpError } from "./plugins/errors.js";
import { uuidParam } from "./validate.js";

/**
 * The provider named by `:id` when the request's `X-API-Key` is that provider's key: 401 when the key is missing
 * or is not this provider's (another provider's key included), 400 for a malformed id, 404 for an unknown one.
 */
export async function authenticatedProvider(
  ctx: Pick<GatewayContext, "db">,
  request: FastifyRequest,
  id: string,
): Promise<ProviderWithSecrets> {
  const presented = request.headers["x-api-key"];
  if (typeof presented !== "string" || presented === "")
    throw new HttpError(401, "missing API key: send it in the X-API-Key header");
  const providerId = uuidParam(id, "provider id");
  const provider = await findProvider(ctx.db, providerId);
  if (!provider) throw new HttpError(404, `provider ${providerId} not found`);
  if (!apiKeyMatches(presented, provider.apiKeyHash))
    throw new HttpError(401, "invalid API key for this provider");
  return provider;
}
