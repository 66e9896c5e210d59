import { Type } from "@sinclair/typebox";
import type { FastifyInstance } from "fastify";
import {
  createRole,
  deleteRole,
  listRoles,
  readRole,
  resetPassword,
  revealPassword,
} from "../../control/roles.js";
import { principalOf } from "./authentication.js";
import { branchObjectRoutes } from "./branch-object-routes.js";
import { presentRole } from "./present-resources.js";
import { type RouteOptions, tags } from "./route-helpers.js";
import { errorResponses } from "./schemas/common.js";
import { Role } from "./schemas/resources.js";

const RoleCreateBody = Type.Object({
  role: Type.Object({
    name: Type.String({ minLength: 1, maxLength: 63 }),
    no_login: Type.Optional(Type.Boolean()),
  }),
});

/** Roles of a branch: real PostgreSQL roles, one per name and project. */
export async function roleRoutes(app: FastifyInstance, { plane }: RouteOptions) {
  const { base, Params, WithOperations, named, answer } = branchObjectRoutes(app, plane, {
    collection: "roles",
    item: "role",
    nameParam: "role_name",
    schema: Role,
    tags: tags.roles,
    summaries: {
      list: "List a branch's roles",
      create: "Create a role; its password is in the answer",
      read: "Get a role",
      remove: "Delete a role from the branch",
    },
    createBody: RoleCreateBody,
    present: presentRole,
    list: listRoles,
    create: createRole,
    read: readRole,
    remove: deleteRole,
  });

  app.get(
    `${base}/:role_name/reveal_password`,
    {
      schema: {
        tags: tags.roles,
        summary: "Reveal a role's password (when the project stores passwords)",
        params: Params,
        response: {
          200: Type.Object({ password: Type.String() }),
          412: errorResponses[400],
          ...errorResponses,
        },
      },
    },
    async (request) => ({ password: await revealPassword(plane, principalOf(request), ...named(request)) }),
  );

  app.post(
    `${base}/:role_name/reset_password`,
    {
      schema: {
        tags: tags.roles,
        summary: "Give a role a new password (it holds on every branch that has the role)",
        params: Params,
        response: { 200: WithOperations, ...errorResponses },
      },
    },
    async (request) => answer(await resetPassword(plane, principalOf(request), ...named(request))),
  );
}
