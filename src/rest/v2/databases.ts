import { Type } from "@sinclair/typebox";
import type { FastifyInstance } from "fastify";
import {
  createDatabase,
  deleteDatabase,
  listDatabases,
  readDatabase,
  updateDatabase,
} from "../../control/databases.js";
import { principalOf } from "./authentication.js";
import { presentDatabase, presentOperation } from "./present-resources.js";
import { type RouteOptions, tags, typed } from "./route-helpers.js";
import { BranchParams, errorResponses, Id, Operations } from "./schemas/common.js";
import { Database } from "./schemas/resources.js";

const DatabaseParams = Type.Object({
  project_id: Id,
  branch_id: Id,
  database_name: Type.String({ minLength: 1, maxLength: 63 }),
});
const DatabaseCreateBody = Type.Object({
  database: Type.Object({
    name: Type.String({ minLength: 1, maxLength: 63 }),
    owner_name: Type.String({ minLength: 1 }),
  }),
});
const DatabaseUpdateBody = Type.Object({
  database: Type.Object({
    name: Type.Optional(Type.String({ minLength: 1, maxLength: 63 })),
    owner_name: Type.Optional(Type.String({ minLength: 1 })),
  }),
});
const DatabaseOperations = Type.Object({ database: Database, operations: Operations });

/** Databases of a branch: real databases on the cluster that hosts projects. */
export async function databaseRoutes(app: FastifyInstance, { plane }: RouteOptions) {
  const db = plane.db;
  const base = "/projects/:project_id/branches/:branch_id/databases";

  app.get(
    base,
    {
      schema: {
        tags: tags.databases,
        summary: "List a branch's databases",
        params: BranchParams,
        response: { 200: Type.Object({ databases: Type.Array(Database) }), ...errorResponses },
      },
    },
    async (request) => {
      const { project_id, branch_id } = typed(BranchParams, request.params);
      return {
        databases: (await listDatabases(db, principalOf(request), project_id, branch_id)).map(
          presentDatabase,
        ),
      };
    },
  );

  app.post(
    base,
    {
      schema: {
        tags: tags.databases,
        summary: "Create a database owned by one of the branch's roles",
        params: BranchParams,
        body: DatabaseCreateBody,
        response: { 201: DatabaseOperations, ...errorResponses },
      },
    },
    async (request, reply) => {
      const { project_id, branch_id } = typed(BranchParams, request.params);
      const { database: input } = typed(DatabaseCreateBody, request.body);
      const { database, operations } = await createDatabase(
        plane,
        principalOf(request),
        project_id,
        branch_id,
        input,
      );
      reply.code(201);
      return { database: presentDatabase(database), operations: operations.map(presentOperation) };
    },
  );

  app.get(
    `${base}/:database_name`,
    {
      schema: {
        tags: tags.databases,
        summary: "Get a database",
        params: DatabaseParams,
        response: { 200: Type.Object({ database: Database }), ...errorResponses },
      },
    },
    async (request) => {
      const { project_id, branch_id, database_name } = typed(DatabaseParams, request.params);
      return {
        database: presentDatabase(
          await readDatabase(db, principalOf(request), project_id, branch_id, database_name),
        ),
      };
    },
  );

  app.patch(
    `${base}/:database_name`,
    {
      schema: {
        tags: tags.databases,
        summary: "Rename a database or change its owner",
        params: DatabaseParams,
        body: DatabaseUpdateBody,
        response: { 200: DatabaseOperations, ...errorResponses },
      },
    },
    async (request) => {
      const { project_id, branch_id, database_name } = typed(DatabaseParams, request.params);
      const { database: input } = typed(DatabaseUpdateBody, request.body);
      const { database, operations } = await updateDatabase(
        plane,
        principalOf(request),
        project_id,
        branch_id,
        database_name,
        input,
      );
      return { database: presentDatabase(database), operations: operations.map(presentOperation) };
    },
  );

  app.delete(
    `${base}/:database_name`,
    {
      schema: {
        tags: tags.databases,
        summary: "Delete a database (dropped for real)",
        params: DatabaseParams,
        response: { 200: DatabaseOperations, ...errorResponses },
      },
    },
    async (request) => {
      const { project_id, branch_id, database_name } = typed(DatabaseParams, request.params);
      const { database, operations } = await deleteDatabase(
        plane,
        principalOf(request),
        project_id,
        branch_id,
        database_name,
      );
      return { database: presentDatabase(database), operations: operations.map(presentOperation) };
    },
  );
}
