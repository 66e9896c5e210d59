import { Type } from "@sinclair/typebox";
import type { FastifyInstance } from "fastify";
import { principalOf } from "./authentication.js";
import { type RouteOptions, tags } from "./route-helpers.js";
import { errorResponses } from "./schemas/common.js";

const AuthDetails = Type.Object({
  account_id: Type.String({
    description: "the user (personal key) or organization (organization or project key)",
  }),
  auth_method: Type.Union([Type.Literal("api_key_user"), Type.Literal("api_key_org")]),
  auth_data: Type.Optional(Type.String({ description: "the API key's id" })),
});

const Region = Type.Object({
  region_id: Type.String(),
  name: Type.String(),
  default: Type.Boolean(),
  geo_lat: Type.String({ description: "empty: this installation does not know where it runs" }),
  geo_long: Type.String(),
});

/**
 * What clients ask about the installation on every run: who the key is (`GET /auth`, which neonctl calls
 * first) and the regions projects can be created in (`GET /regions`, for `neonctl link`). One installation is
 * one region, `PGTOLL_REGION`.
 */
export async function installationRoutes(app: FastifyInstance, { plane }: RouteOptions) {
  app.get(
    "/auth",
    {
      schema: {
        tags: tags.users,
        summary: "The account and kind of the API key in the request",
        response: { 200: AuthDetails, ...errorResponses },
      },
    },
    async (request) => {
      const principal = principalOf(request);
      return {
        account_id: principal.accountId,
        auth_method: principal.kind === "personal" ? ("api_key_user" as const) : ("api_key_org" as const),
        auth_data: String(principal.keyId),
      };
    },
  );

  app.get(
    "/regions",
    {
      schema: {
        tags: tags.projects,
        summary: "Regions projects can be created in: this installation's one",
        querystring: Type.Object({
          org_id: Type.Optional(Type.String({ pattern: "^[a-z0-9-]{1,60}$" })),
        }),
        response: { 200: Type.Object({ regions: Type.Array(Region) }), ...errorResponses },
      },
    },
    async () => ({
      regions: [
        {
          region_id: plane.settings.regionId,
          name: `pgtoll (${plane.settings.regionId})`,
          default: true,
          geo_lat: "",
          geo_long: "",
        },
      ],
    }),
  );
}
