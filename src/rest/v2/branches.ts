import { Type } from "@sinclair/typebox";
import type { FastifyInstance } from "fastify";
import { projectFor } from "../../control/access.js";
import { createBranch } from "../../control/branch-create.js";
import { deleteBranch } from "../../control/branch-delete.js";
import { listBranches, readBranch } from "../../control/branch-list.js";
import { restoreBranch } from "../../control/branch-restore.js";
import { setDefaultBranch, updateBranch } from "../../control/branch-update.js";
import { databasesOf, endpointsOfBranch, rolesOf } from "../../control/lookups.js";
import { disclosePassword } from "../../control/password-disclosures.js";
import type { BranchRow } from "../../control/rows.js";
import { branchSchema } from "../../control/schema-dump.js";
import { describeBranches } from "../../control/views.js";
import { principalOf } from "./authentication.js";
import {
  presentBranch,
  presentConnection,
  presentDatabase,
  presentEndpoint,
  presentOperation,
  presentRole,
} from "./present-resources.js";
import { type RouteOptions, tags, typed } from "./route-helpers.js";
import {
  BranchCreateBody,
  BranchCreated,
  BranchList,
  BranchListQuery,
  BranchOperations,
  BranchRestoreBody,
  BranchUpdateBody,
} from "./schemas/branches.js";
import { BranchParams, errorResponses, ProjectParams } from "./schemas/common.js";
import { Branch } from "./schemas/resources.js";

/** Branches: create (parent-data or schema-only), list, count, get, rename, delete, restore, set as default. */
export async function branchRoutes(app: FastifyInstance, { plane }: RouteOptions) {
  const { db, settings } = plane;
  const present = async (branch: BranchRow) => presentBranch((await describeBranches(plane, [branch]))[0]!);

  app.post(
    "/projects/:project_id/branches",
    {
      schema: {
        tags: tags.branches,
        summary: "Create a branch: a copy of its parent's databases (schema and data, or schema only)",
        params: ProjectParams,
        body: BranchCreateBody,
        response: { 201: BranchCreated, ...errorResponses },
      },
    },
    async (request, reply) => {
      const { project_id } = typed(ProjectParams, request.params);
      const body = typed(BranchCreateBody, request.body);
      const { branch, operations } = await createBranch(plane, principalOf(request), project_id, body);
      const [endpoints, roles, databases] = await Promise.all([
        endpointsOfBranch(db, branch.id),
        rolesOf(db, branch.id),
        databasesOf(db, branch.id),
      ]);
      const { project } = await projectFor(db, principalOf(request), project_id);
      const login = roles.filter((role) => !role.noLogin && role.passwordSealed);
      const endpoint = endpoints.find((e) => e.type === "read_write") ?? endpoints[0];
      reply.code(201);
      return {
        branch: await present(branch),
        endpoints: endpoints.map((e) => presentEndpoint(e, settings, project.regionId)),
        operations: operations.map(presentOperation),
        roles: roles.map((role) => presentRole(role)),
        databases: databases.map(presentDatabase),
        ...(endpoint && login.length === 1 && databases.length === 1
          ? {
              connection_uris: [
                presentConnection(settings, {
                  endpointId: endpoint.id,
                  role: login[0]!.name,
                  password: await disclosePassword(plane, principalOf(request), project_id, login[0]!.name),
                  database: databases[0]!.name,
                }),
              ],
            }
          : {}),
      };
    },
  );

  app.get(
    "/projects/:project_id/branches",
    {
      schema: {
        tags: tags.branches,
        summary: "List a project's branches",
        params: ProjectParams,
        querystring: BranchListQuery,
        response: { 200: BranchList, ...errorResponses },
      },
    },
    async (request) => {
      const { project_id } = typed(ProjectParams, request.params);
      const query = typed(BranchListQuery, request.query);
      const page = await listBranches(db, principalOf(request), project_id, {
        search: query.search,
        sortBy: query.sort_by,
        sortOrder: query.sort_order,
        cursor: query.cursor,
        limit: query.limit,
      });
      const views = await describeBranches(plane, page.branches);
      return {
        branches: views.map(presentBranch),
        annotations: {},
        ...(page.next
          ? {
              pagination: {
                next: page.next,
                sort_by: query.sort_by ?? "updated_at",
                sort_order: query.sort_order ?? "desc",
              },
            }
          : {}),
      };
    },
  );

  app.get(
    "/projects/:project_id/branches/:branch_id/schema",
    {
      schema: {
        tags: tags.branches,
        summary:
          "A branch database's schema, as pg_dump --schema-only text (what neonctl branches schema-diff compares)",
        params: BranchParams,
        querystring: Type.Object({
          db_name: Type.String({ minLength: 1, description: "the database, by its name in the API" }),
          lsn: Type.Optional(Type.String({ description: "refused: there is no history" })),
          timestamp: Type.Optional(Type.String({ description: "refused: there is no history" })),
          format: Type.Optional(Type.String({ description: "sql (the only one offered)" })),
        }),
        response: { 200: Type.Object({ sql: Type.String() }), ...errorResponses },
      },
    },
    async (request) => {
      const { project_id, branch_id } = typed(BranchParams, request.params);
      const query = request.query as { db_name: string; lsn?: string; timestamp?: string; format?: string };
      return { sql: await branchSchema(plane, principalOf(request), project_id, branch_id, query) };
    },
  );

  app.get(
    "/projects/:project_id/branches/count",
    {
      schema: {
        tags: tags.branches,
        summary: "Count a project's branches",
        params: ProjectParams,
        querystring: Type.Object({ search: Type.Optional(Type.String()) }),
        response: { 200: Type.Object({ count: Type.Integer() }), ...errorResponses },
      },
    },
    async (request) => {
      const { project_id } = typed(ProjectParams, request.params);
      const { search } = request.query as { search?: string };
      const page = await listBranches(db, principalOf(request), project_id, { search });
      return { count: page.branches.length };
    },
  );

  app.get(
    "/projects/:project_id/branches/:branch_id",
    {
      schema: {
        tags: tags.branches,
        summary: "Get a branch",
        params: BranchParams,
        response: { 200: Type.Object({ branch: Branch }), ...errorResponses },
      },
    },
    async (request) => {
      const { project_id, branch_id } = typed(BranchParams, request.params);
      return { branch: await present(await readBranch(db, principalOf(request), project_id, branch_id)) };
    },
  );

  app.patch(
    "/projects/:project_id/branches/:branch_id",
    {
      schema: {
        tags: tags.branches,
        summary: "Rename a branch, or change its protection or expiry",
        params: BranchParams,
        body: BranchUpdateBody,
        response: { 200: BranchOperations, ...errorResponses },
      },
    },
    async (request) => {
      const { project_id, branch_id } = typed(BranchParams, request.params);
      const { branch: input } = typed(BranchUpdateBody, request.body);
      const { branch, operations } = await updateBranch(
        plane,
        principalOf(request),
        project_id,
        branch_id,
        input,
      );
      return { branch: await present(branch), operations: operations.map(presentOperation) };
    },
  );

  app.delete(
    "/projects/:project_id/branches/:branch_id",
    {
      schema: {
        tags: tags.branches,
        summary: "Delete a branch (not the default branch, a protected branch, or a branch with children)",
        params: BranchParams,
        response: { 200: BranchOperations, ...errorResponses },
      },
    },
    async (request) => {
      const { project_id, branch_id } = typed(BranchParams, request.params);
      const { branch, operations } = await deleteBranch(plane, principalOf(request), project_id, branch_id);
      return {
        branch: presentBranch({ branch, usage: { sizeBytes: 0, activeMs: 0, sessionMs: 0 } }),
        operations: operations.map(presentOperation),
      };
    },
  );

  app.post(
    "/projects/:project_id/branches/:branch_id/restore",
    {
      schema: {
        tags: tags.branches,
        summary: "Restore a branch to the current state of another branch (typically its parent)",
        params: BranchParams,
        body: BranchRestoreBody,
        response: { 200: BranchOperations, ...errorResponses },
      },
    },
    async (request) => {
      const { project_id, branch_id } = typed(BranchParams, request.params);
      const body = typed(BranchRestoreBody, request.body);
      const { branch, operations } = await restoreBranch(
        plane,
        principalOf(request),
        project_id,
        branch_id,
        body,
      );
      return { branch: await present(branch), operations: operations.map(presentOperation) };
    },
  );

  app.post(
    "/projects/:project_id/branches/:branch_id/set_as_default",
    {
      schema: {
        tags: tags.branches,
        summary: "Make a branch the project's default branch",
        params: BranchParams,
        response: { 200: BranchOperations, ...errorResponses },
      },
    },
    async (request) => {
      const { project_id, branch_id } = typed(BranchParams, request.params);
      const { branch, operations } = await setDefaultBranch(
        plane,
        principalOf(request),
        project_id,
        branch_id,
      );
      return { branch: await present(branch), operations: operations.map(presentOperation) };
    },
  );
}
