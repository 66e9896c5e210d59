import { Type } from "@sinclair/typebox";
import type { FastifyInstance } from "fastify";
import {
  grantPermission,
  listPermissions,
  type ProjectPermission,
  revokePermission,
} from "../../control/project-permissions.js";
import { principalOf } from "./authentication.js";
import { type RouteOptions, tags, typed } from "./route-helpers.js";
import { errorResponses, Id, ProjectParams, Timestamp } from "./schemas/common.js";

const Permission = Type.Object({
  id: Type.String(),
  granted_to_email: Type.String(),
  granted_at: Timestamp,
  revoked_at: Type.Optional(Timestamp),
});
const GrantBody = Type.Object({ email: Type.String({ minLength: 1, maxLength: 256 }) });
const PermissionParams = Type.Object({ project_id: Id, permission_id: Type.String() });

function presentPermission(permission: ProjectPermission) {
  return {
    id: permission.id,
    granted_to_email: permission.grantedToEmail,
    granted_at: permission.grantedAt.toISOString(),
    ...(permission.revokedAt ? { revoked_at: permission.revokedAt.toISOString() } : {}),
  };
}

/** Who a project is shared with, by email (see control/project-permissions.ts for the access it gives). */
export async function projectPermissionRoutes(app: FastifyInstance, { plane }: RouteOptions) {
  const db = plane.db;

  app.get(
    "/projects/:project_id/permissions",
    {
      schema: {
        tags: tags.projects,
        summary: "Users (by email) the project is shared with",
        params: ProjectParams,
        response: { 200: Type.Object({ project_permissions: Type.Array(Permission) }), ...errorResponses },
      },
    },
    async (request) => {
      const { project_id } = typed(ProjectParams, request.params);
      const permissions = await listPermissions(db, principalOf(request), project_id);
      return { project_permissions: permissions.map(presentPermission) };
    },
  );

  app.post(
    "/projects/:project_id/permissions",
    {
      schema: {
        tags: tags.projects,
        summary: "Share the project with the user of an email address",
        params: ProjectParams,
        body: GrantBody,
        response: { 200: Permission, ...errorResponses },
      },
    },
    async (request) => {
      const { project_id } = typed(ProjectParams, request.params);
      const { email } = typed(GrantBody, request.body);
      return presentPermission(await grantPermission(db, principalOf(request), project_id, email));
    },
  );

  app.delete(
    "/projects/:project_id/permissions/:permission_id",
    {
      schema: {
        tags: tags.projects,
        summary: "Stop sharing the project with a user",
        params: PermissionParams,
        response: { 200: Permission, ...errorResponses },
      },
    },
    async (request) => {
      const { project_id, permission_id } = typed(PermissionParams, request.params);
      return presentPermission(
        await revokePermission(plane, principalOf(request), project_id, permission_id),
      );
    },
  );
}
