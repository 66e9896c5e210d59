import { Type } from "@sinclair/typebox";
import type { FastifyInstance, FastifyRequest } from "fastify";
import { connectionTarget } from "../../control/connection-target.js";
import { connectionUri } from "../../control/connection-uri.js";
import { createProject } from "../../control/project-create.js";
import { listProjects } from "../../control/project-list.js";
import { deleteProject, getProject, loadProject, updateProject } from "../../control/projects.js";
import { describeBranches, describeProjects } from "../../control/views.js";
import { principalOf } from "./authentication.js";
import {
  presentBranch,
  presentConnection,
  presentDatabase,
  presentEndpoint,
  presentOperation,
  presentProject,
  presentProjectListItem,
  presentRole,
} from "./present-resources.js";
import { type RouteOptions, tags, typed } from "./route-helpers.js";
import { errorResponses, Operations, ProjectParams } from "./schemas/common.js";
import {
  ConnectionUriQuery,
  Project,
  ProjectCreateBody,
  ProjectCreated,
  ProjectList,
  ProjectListQuery,
  ProjectUpdateBody,
} from "./schemas/projects.js";

/** Projects: list (cursor/limit), create, get, update, delete, and connection URIs. */
export async function projectRoutes(app: FastifyInstance, { plane }: RouteOptions) {
  const { db, settings } = plane;
  const view = async (projectId: string) =>
    (await describeProjects(plane, [await loadProject(db, projectId)]))[0]!;

  /** A page of the caller's projects, or of those shared with it. */
  const projectPage = async (request: FastifyRequest, shared: boolean) => {
    const query = typed(ProjectListQuery, request.query);
    const page = await listProjects(db, principalOf(request), {
      cursor: query.cursor,
      limit: query.limit,
      search: query.search,
      ...(shared ? { shared } : { orgId: query.org_id }),
    });
    const views = await describeProjects(plane, page.projects);
    return {
      projects: views.map((v) => presentProjectListItem(v, settings)),
      ...(page.cursor ? { pagination: { cursor: page.cursor } } : {}),
      applications: {},
      integrations: {},
    };
  };

  app.get(
    "/projects",
    {
      schema: {
        tags: tags.projects,
        summary: "List projects",
        querystring: ProjectListQuery,
        response: { 200: ProjectList, ...errorResponses },
      },
    },
    (request) => projectPage(request, false),
  );

  app.get(
    "/projects/shared",
    {
      schema: {
        tags: tags.projects,
        summary: "Projects shared with the caller's email (POST /projects/{project_id}/permissions)",
        querystring: ProjectListQuery,
        response: { 200: ProjectList, ...errorResponses },
      },
    },
    (request) => projectPage(request, true),
  );

  app.post(
    "/projects",
    {
      schema: {
        tags: tags.projects,
        summary: "Create a project",
        body: ProjectCreateBody,
        response: { 201: ProjectCreated, ...errorResponses },
      },
    },
    async (request, reply) => {
      const { project: input } = typed(ProjectCreateBody, request.body);
      const created = await createProject(plane, principalOf(request), input);
      const [projectView] = await describeProjects(plane, [created.project]);
      const [branchView] = await describeBranches(plane, [created.branch]);
      const endpoint = created.endpoints[0];
      const connection_uris =
        endpoint && created.roles[0] && created.databases[0]
          ? [
              presentConnection(settings, {
                endpointId: endpoint.id,
                role: created.roles[0].name,
                password: created.passwords.get(created.roles[0].name) ?? "",
                database: created.databases[0].name,
              }),
            ]
          : [];
      reply.code(201);
      return {
        project: presentProject(projectView!, settings),
        connection_uris,
        roles: created.roles.map((role) => presentRole(role, created.passwords.get(role.name))),
        databases: created.databases.map(presentDatabase),
        operations: created.operations.map(presentOperation),
        branch: presentBranch(branchView!),
        endpoints: created.endpoints.map((e) => presentEndpoint(e, settings, created.project.regionId)),
      };
    },
  );

  app.get(
    "/projects/:project_id",
    {
      schema: {
        tags: tags.projects,
        summary: "Get a project",
        params: ProjectParams,
        response: { 200: Type.Object({ project: Project }), ...errorResponses },
      },
    },
    async (request) => {
      const { project_id } = typed(ProjectParams, request.params);
      const project = await getProject(db, principalOf(request), project_id);
      return { project: presentProject((await describeProjects(plane, [project]))[0]!, settings) };
    },
  );

  app.patch(
    "/projects/:project_id",
    {
      schema: {
        tags: tags.projects,
        summary: "Update a project",
        params: ProjectParams,
        body: ProjectUpdateBody,
        response: { 200: Type.Object({ project: Project, operations: Operations }), ...errorResponses },
      },
    },
    async (request) => {
      const { project_id } = typed(ProjectParams, request.params);
      const { project: input } = typed(ProjectUpdateBody, request.body);
      const { operations } = await updateProject(plane, principalOf(request), project_id, input);
      return {
        project: presentProject(await view(project_id), settings),
        operations: operations.map(presentOperation),
      };
    },
  );

  app.delete(
    "/projects/:project_id",
    {
      schema: {
        tags: tags.projects,
        summary: "Delete a project and its databases and roles",
        params: ProjectParams,
        response: { 200: Type.Object({ project: Project }), ...errorResponses },
      },
    },
    async (request) => {
      const { project_id } = typed(ProjectParams, request.params);
      const before = await view(project_id).catch(() => null);
      const project = await deleteProject(plane, principalOf(request), project_id);
      const final = before ?? {
        project,
        usage: { sizeBytes: 0, activeMs: 0, sessionMs: 0 },
        locked: false,
        computeLastActiveAt: null,
      };
      return { project: presentProject({ ...final, project, locked: false }, settings) };
    },
  );

  app.get(
    "/projects/:project_id/connection_uri",
    {
      schema: {
        tags: tags.projects,
        summary: "A connection URI for a role and database of a branch, through an endpoint",
        params: ProjectParams,
        querystring: ConnectionUriQuery,
        response: { 200: Type.Object({ uri: Type.String() }), ...errorResponses },
      },
    },
    async (request) => {
      const { project_id } = typed(ProjectParams, request.params);
      const query = typed(ConnectionUriQuery, request.query);
      const target = await connectionTarget(plane, principalOf(request), project_id, query);
      return {
        uri: connectionUri(settings, {
          endpointId: target.endpoint.id,
          role: target.role,
          password: target.password,
          database: target.database,
          pooled: query.pooled,
        }),
      };
    },
  );
}
