import { Type } from "@sinclair/typebox";
import type { FastifyInstance } from "fastify";
import { projectFor } from "../../control/access.js";
import {
  createEndpoint,
  deleteEndpoint,
  listEndpoints,
  readEndpoint,
  restartEndpoint,
  startEndpoint,
  suspendEndpoint,
  updateEndpoint,
} from "../../control/endpoints.js";
import type { EndpointRow } from "../../control/rows.js";
import { principalOf } from "./authentication.js";
import { presentEndpoint, presentOperation } from "./present-resources.js";
import { type RouteOptions, tags, typed } from "./route-helpers.js";
import { EndpointOptions } from "./schemas/branches.js";
import { AnyObject, BranchParams, errorResponses, Id, Operations, ProjectParams } from "./schemas/common.js";
import { Endpoint } from "./schemas/resources.js";

const EndpointParams = Type.Object({ project_id: Id, endpoint_id: Id });
const EndpointCreateBody = Type.Object({
  endpoint: Type.Composite([
    EndpointOptions,
    Type.Object({
      branch_id: Id,
      region_id: Type.Optional(Type.String()),
      disabled: Type.Optional(Type.Boolean()),
      pooler_enabled: Type.Optional(Type.Boolean()),
    }),
  ]),
});
const EndpointUpdateBody = Type.Object({
  endpoint: Type.Object({
    branch_id: Type.Optional(Id),
    name: Type.Optional(Type.String({ minLength: 1, maxLength: 64 })),
    autoscaling_limit_min_cu: Type.Optional(Type.Number({ minimum: 0.25 })),
    autoscaling_limit_max_cu: Type.Optional(Type.Number({ minimum: 0.25 })),
    suspend_timeout_seconds: Type.Optional(Type.Integer({ minimum: -1, maximum: 604_800 })),
    settings: Type.Optional(AnyObject),
    disabled: Type.Optional(Type.Boolean()),
    pooler_enabled: Type.Optional(Type.Boolean()),
    passwordless_access: Type.Optional(Type.Boolean({ description: "not available: true is refused" })),
  }),
});
const EndpointOperations = Type.Object({ endpoint: Endpoint, operations: Operations });

/** Endpoints (computes): how clients reach a branch through the wire proxy. */
export async function endpointRoutes(app: FastifyInstance, { plane }: RouteOptions) {
  const { db, settings } = plane;
  const regionOf = async (request: Parameters<typeof principalOf>[0], projectId: string) =>
    (await projectFor(db, principalOf(request), projectId)).project.regionId;
  const present = (endpoint: EndpointRow, region: string) => presentEndpoint(endpoint, settings, region);

  app.get(
    "/projects/:project_id/endpoints",
    {
      schema: {
        tags: tags.endpoints,
        summary: "List a project's endpoints",
        params: ProjectParams,
        response: { 200: Type.Object({ endpoints: Type.Array(Endpoint) }), ...errorResponses },
      },
    },
    async (request) => {
      const { project_id } = typed(ProjectParams, request.params);
      const endpoints = await listEndpoints(db, principalOf(request), project_id);
      const region = await regionOf(request, project_id);
      return { endpoints: endpoints.map((e) => present(e, region)) };
    },
  );

  app.get(
    "/projects/:project_id/branches/:branch_id/endpoints",
    {
      schema: {
        tags: tags.endpoints,
        summary: "List a branch's endpoints",
        params: BranchParams,
        response: { 200: Type.Object({ endpoints: Type.Array(Endpoint) }), ...errorResponses },
      },
    },
    async (request) => {
      const { project_id, branch_id } = typed(BranchParams, request.params);
      const endpoints = await listEndpoints(db, principalOf(request), project_id, branch_id);
      const region = await regionOf(request, project_id);
      return { endpoints: endpoints.map((e) => present(e, region)) };
    },
  );

  app.post(
    "/projects/:project_id/endpoints",
    {
      schema: {
        tags: tags.endpoints,
        summary: "Create an endpoint of a branch (at most one read_write per branch)",
        params: ProjectParams,
        body: EndpointCreateBody,
        response: { 201: EndpointOperations, ...errorResponses },
      },
    },
    async (request, reply) => {
      const { project_id } = typed(ProjectParams, request.params);
      const { endpoint: input } = typed(EndpointCreateBody, request.body);
      const { endpoint, operations } = await createEndpoint(plane, principalOf(request), project_id, input);
      reply.code(201);
      return {
        endpoint: present(endpoint, await regionOf(request, project_id)),
        operations: operations.map(presentOperation),
      };
    },
  );

  app.get(
    "/projects/:project_id/endpoints/:endpoint_id",
    {
      schema: {
        tags: tags.endpoints,
        summary: "Get an endpoint",
        params: EndpointParams,
        response: { 200: Type.Object({ endpoint: Endpoint }), ...errorResponses },
      },
    },
    async (request) => {
      const { project_id, endpoint_id } = typed(EndpointParams, request.params);
      const endpoint = await readEndpoint(db, principalOf(request), project_id, endpoint_id);
      return { endpoint: present(endpoint, await regionOf(request, project_id)) };
    },
  );

  app.patch(
    "/projects/:project_id/endpoints/:endpoint_id",
    {
      schema: {
        tags: tags.endpoints,
        summary: "Update an endpoint (settings, branch, disabled)",
        params: EndpointParams,
        body: EndpointUpdateBody,
        response: { 200: EndpointOperations, ...errorResponses },
      },
    },
    async (request) => {
      const { project_id, endpoint_id } = typed(EndpointParams, request.params);
      const { endpoint: input } = typed(EndpointUpdateBody, request.body);
      const { endpoint, operations } = await updateEndpoint(
        plane,
        principalOf(request),
        project_id,
        endpoint_id,
        input,
      );
      return {
        endpoint: present(endpoint, await regionOf(request, project_id)),
        operations: operations.map(presentOperation),
      };
    },
  );

  app.delete(
    "/projects/:project_id/endpoints/:endpoint_id",
    {
      schema: {
        tags: tags.endpoints,
        summary: "Delete an endpoint (its sessions end)",
        params: EndpointParams,
        response: { 200: EndpointOperations, ...errorResponses },
      },
    },
    async (request) => {
      const { project_id, endpoint_id } = typed(EndpointParams, request.params);
      const { endpoint, operations } = await deleteEndpoint(
        plane,
        principalOf(request),
        project_id,
        endpoint_id,
      );
      return {
        endpoint: present(endpoint, await regionOf(request, project_id)),
        operations: operations.map(presentOperation),
      };
    },
  );

  for (const [action, run, summary] of [
    ["start", startEndpoint, "Start an endpoint"],
    [
      "suspend",
      suspendEndpoint,
      "Suspend an endpoint: its sessions end and it refuses connections until started",
    ],
    ["restart", restartEndpoint, "Restart an endpoint: its sessions end"],
  ] as const) {
    app.post(
      `/projects/:project_id/endpoints/:endpoint_id/${action}`,
      {
        schema: {
          tags: tags.endpoints,
          summary,
          params: EndpointParams,
          response: { 200: EndpointOperations, ...errorResponses },
        },
      },
      async (request) => {
        const { project_id, endpoint_id } = typed(EndpointParams, request.params);
        const { endpoint, operations } = await run(plane, principalOf(request), project_id, endpoint_id);
        return {
          endpoint: present(endpoint, await regionOf(request, project_id)),
          operations: operations.map(presentOperation),
        };
      },
    );
  }
}
