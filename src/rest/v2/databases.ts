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
import { branchObjectRoutes } from "./branch-object-routes.js";
import { presentDatabase } from "./present-resources.js";
import { type RouteOptions, tags, typed } from "./route-helpers.js";
import { errorResponses } from "./schemas/common.js";
import { Database } from "./schemas/resources.js";

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

/** Databases of a branch: real databases on the cluster that hosts projects. */
export async function databaseRoutes(app: FastifyInstance, { plane }: RouteOptions) {
  const { base, Params, WithOperations, named, answer } = branchObjectRoutes(app, plane, {
    collection: "databases",
    item: "database",
    nameParam: "database_name",
    schema: Database,
    tags: tags.databases,
    summaries: {
      list: "List a branch's databases",
      create: "Create a database owned by one of the branch's roles",
      read: "Get a database",
      remove: "Delete a database (dropped for real)",
    },
    present: presentDatabase,
    createBody: DatabaseCreateBody,
    list: listDatabases,
    create: createDatabase,
    read: readDatabase,
    remove: deleteDatabase,
  });

  app.patch(
    `${base}/:database_name`,
    {
      schema: {
        tags: tags.databases,
        summary: "Rename a database or change its owner",
        params: Params,
        body: DatabaseUpdateBody,
        response: { 200: WithOperations, ...errorResponses },
      },
    },
    async (request) => {
      const { database: input } = typed(DatabaseUpdateBody, request.body);
      return answer(await updateDatabase(plane, principalOf(request), ...named(request), input));
    },
  );
}
