import { Type } from "@sinclair/typebox";
import type { FastifyInstance } from "fastify";
import { projectFor } from "../../control/access.js";
import { getOperation, listOperations } from "../../control/operations.js";
import { principalOf } from "./authentication.js";
import { presentOperation } from "./present-resources.js";
import { type RouteOptions, tags, typed } from "./route-helpers.js";
import { errorResponses, Id, Operation, Operations, ProjectParams } from "./schemas/common.js";

const OperationParams = Type.Object({ project_id: Id, operation_id: Type.String({ maxLength: 64 }) });
const OperationListQuery = Type.Object({
  cursor: Type.Optional(Type.String()),
  limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000 })),
});

/** Operations of a project, newest first, for polling. */
export async function operationRoutes(app: FastifyInstance, { plane }: RouteOptions) {
  const db = plane.db;

  app.get(
    "/projects/:project_id/operations",
    {
      schema: {
        tags: tags.operations,
        summary: "List a project's operations, newest first",
        params: ProjectParams,
        querystring: OperationListQuery,
        response: {
          200: Type.Object({
            operations: Operations,
            pagination: Type.Optional(Type.Object({ cursor: Type.String() })),
          }),
          ...errorResponses,
        },
      },
    },
    async (request) => {
      const { project_id } = typed(ProjectParams, request.params);
      const query = typed(OperationListQuery, request.query);
      await projectFor(db, principalOf(request), project_id);
      const page = await listOperations(db, project_id, query);
      return {
        operations: page.operations.map(presentOperation),
        ...(page.cursor ? { pagination: { cursor: page.cursor } } : {}),
      };
    },
  );

  app.get(
    "/projects/:project_id/operations/:operation_id",
    {
      schema: {
        tags: tags.operations,
        summary: "Get an operation (poll its status)",
        params: OperationParams,
        response: { 200: Type.Object({ operation: Operation }), ...errorResponses },
      },
    },
    async (request) => {
      const { project_id, operation_id } = typed(OperationParams, request.params);
      await projectFor(db, principalOf(request), project_id);
      return { operation: presentOperation(await getOperation(db, project_id, operation_id)) };
    },
  );
}
