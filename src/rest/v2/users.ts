import { Type } from "@sinclair/typebox";
import type { FastifyInstance } from "fastify";
import { notFound } from "../../control/control-error.js";
import { getOrganization, organizationsOfUser } from "../../control/organizations.js";
import { transferProjects } from "../../control/transfer.js";
import { getUser } from "../../control/users.js";
import { principalOf } from "./authentication.js";
import { presentOrganization, presentUser } from "./present-accounts.js";
import { personalPrincipal, type RouteOptions, tags, typed } from "./route-helpers.js";
import { CurrentUser, Organization, TransferBody } from "./schemas/accounts.js";
import { errorResponses } from "./schemas/common.js";

/** The caller's own account: who it is, its organizations, moving its projects into an organization. */
export async function userRoutes(app: FastifyInstance, { plane }: RouteOptions) {
  const db = plane.db;

  app.get(
    "/users/me",
    {
      schema: {
        tags: tags.users,
        summary: "The user a personal API key belongs to",
        response: { 200: CurrentUser, ...errorResponses },
      },
    },
    async (request) => {
      const caller = personalPrincipal(request, "read the current user");
      const user = await getUser(db, caller.userId);
      if (!user) throw notFound("user not found");
      return presentUser(user);
    },
  );

  app.get(
    "/users/me/organizations",
    {
      schema: {
        tags: tags.users,
        summary:
          "Organizations the caller belongs to (an organization key: its own; a project-scoped key: none)",
        response: { 200: Type.Object({ organizations: Type.Array(Organization) }), ...errorResponses },
      },
    },
    async (request) => {
      const principal = principalOf(request);
      if (principal.kind === "personal") {
        return { organizations: (await organizationsOfUser(db, principal.userId)).map(presentOrganization) };
      }
      if (principal.kind === "organization") {
        const org = await getOrganization(db, principal.orgId);
        return { organizations: org ? [presentOrganization(org)] : [] };
      }
      return { organizations: [] };
    },
  );

  app.post(
    "/users/me/projects/transfer",
    {
      schema: {
        tags: tags.users,
        summary: "Move the caller's own projects into an organization it belongs to",
        body: TransferBody,
        response: { 200: Type.Object({}), ...errorResponses },
      },
    },
    async (request) => {
      const body = typed(TransferBody, request.body);
      await transferProjects(plane, principalOf(request), null, body.destination_org_id, body.project_ids);
      return {};
    },
  );
}
