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
import { presentOperation, presentRole } from "./present-resources.js";
import { type RouteOptions, tags, typed } from "./route-helpers.js";
import { BranchParams, errorResponses, Id, Operations } from "./schemas/common.js";
import { Role } from "./schemas/resources.js";

const RoleParams = Type.Object({
  project_id: Id,
  branch_id: Id,
  role_name: Type.String({ minLength: 1, maxLength: 63 }),
});
const RoleCreateBody = Type.Object({
  role: Type.Object({
    name: Type.String({ minLength: 1, maxLength: 63 }),
    no_login: Type.Optional(Type.Boolean()),
  }),
});
const RoleOperations = Type.Object({ role: Role, operations: Operations });

/** Roles of a branch: real PostgreSQL roles, one per name and project. */
export async function roleRoutes(app: FastifyInstance, { plane }: RouteOptions) {
  const db = plane.db;
  const base = "/projects/:project_id/branches/:branch_id/roles";

  app.get(
    base,
    {
      schema: {
        tags: tags.roles,
        summary: "List a branch's roles",
        params: BranchParams,
        response: { 200: Type.Object({ roles: Type.Array(Role) }), ...errorResponses },
      },
    },
    async (request) => {
      const { project_id, branch_id } = typed(BranchParams, request.params);
      return {
        roles: (await listRoles(db, principalOf(request), project_id, branch_id)).map((role) =>
          presentRole(role),
        ),
      };
    },
  );

  app.post(
    base,
    {
      schema: {
        tags: tags.roles,
        summary: "Create a role; its password is in the answer",
        params: BranchParams,
        body: RoleCreateBody,
        response: { 201: RoleOperations, ...errorResponses },
      },
    },
    async (request, reply) => {
      const { project_id, branch_id } = typed(BranchParams, request.params);
      const { role: input } = typed(RoleCreateBody, request.body);
      const { role, password, operations } = await createRole(
        plane,
        principalOf(request),
        project_id,
        branch_id,
        input,
      );
      reply.code(201);
      return { role: presentRole(role, password), operations: operations.map(presentOperation) };
    },
  );

  app.get(
    `${base}/:role_name`,
    {
      schema: {
        tags: tags.roles,
        summary: "Get a role",
        params: RoleParams,
        response: { 200: Type.Object({ role: Role }), ...errorResponses },
      },
    },
    async (request) => {
      const { project_id, branch_id, role_name } = typed(RoleParams, request.params);
      return {
        role: presentRole(await readRole(db, principalOf(request), project_id, branch_id, role_name)),
      };
    },
  );

  app.delete(
    `${base}/:role_name`,
    {
      schema: {
        tags: tags.roles,
        summary: "Delete a role from the branch",
        params: RoleParams,
        response: { 200: RoleOperations, ...errorResponses },
      },
    },
    async (request) => {
      const { project_id, branch_id, role_name } = typed(RoleParams, request.params);
      const { role, operations } = await deleteRole(
        plane,
        principalOf(request),
        project_id,
        branch_id,
        role_name,
      );
      return { role: presentRole(role), operations: operations.map(presentOperation) };
    },
  );

  app.get(
    `${base}/:role_name/reveal_password`,
    {
      schema: {
        tags: tags.roles,
        summary: "Reveal a role's password (when the project stores passwords)",
        params: RoleParams,
        response: {
          200: Type.Object({ password: Type.String() }),
          412: errorResponses[400],
          ...errorResponses,
        },
      },
    },
    async (request) => {
      const { project_id, branch_id, role_name } = typed(RoleParams, request.params);
      return {
        password: await revealPassword(plane, principalOf(request), project_id, branch_id, role_name),
      };
    },
  );

  app.post(
    `${base}/:role_name/reset_password`,
    {
      schema: {
        tags: tags.roles,
        summary: "Give a role a new password (it holds on every branch that has the role)",
        params: RoleParams,
        response: { 200: RoleOperations, ...errorResponses },
      },
    },
    async (request) => {
      const { project_id, branch_id, role_name } = typed(RoleParams, request.params);
      const { role, password, operations } = await resetPassword(
        plane,
        principalOf(request),
        project_id,
        branch_id,
        role_name,
      );
      return { role: presentRole(role, password), operations: operations.map(presentOperation) };
    },
  );
}
