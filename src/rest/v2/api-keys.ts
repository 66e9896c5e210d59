import { Type } from "@sinclair/typebox";
import type { FastifyInstance } from "fastify";
import {
  createOrganizationKey,
  createPersonalKey,
  listOrganizationKeys,
  listPersonalKeys,
  revokeOrganizationKey,
  revokePersonalKey,
} from "../../control/api-keys.js";
import { presentCreatedKey, presentKeyListItem, presentRevokedKey } from "./present-accounts.js";
import { personalPrincipal, type RouteOptions, tags, typed } from "./route-helpers.js";
import {
  ApiKeyCreateBody,
  ApiKeyCreated,
  ApiKeyListItem,
  ApiKeyRevoked,
  KeyParams,
  OrgApiKeyCreateBody,
  OrgKeyParams,
  OrgParams,
} from "./schemas/accounts.js";
import { errorResponses } from "./schemas/common.js";

/** Personal keys (/api_keys) and organization and project-scoped keys (/organizations/{org_id}/api_keys). */
export async function apiKeyRoutes(app: FastifyInstance, { plane }: RouteOptions) {
  const db = plane.db;

  app.post(
    "/api_keys",
    {
      schema: {
        tags: tags.keys,
        summary: "Create a personal API key",
        body: ApiKeyCreateBody,
        response: { 200: ApiKeyCreated, ...errorResponses },
      },
    },
    async (request) => {
      const caller = personalPrincipal(request, "create personal API keys");
      const { key_name } = typed(ApiKeyCreateBody, request.body);
      return presentCreatedKey(await createPersonalKey(db, caller.userId, key_name));
    },
  );

  app.get(
    "/api_keys",
    {
      schema: {
        tags: tags.keys,
        summary: "List the caller's personal API keys",
        response: { 200: Type.Array(ApiKeyListItem), ...errorResponses },
      },
    },
    async (request) => {
      const caller = personalPrincipal(request, "list personal API keys");
      return (await listPersonalKeys(db, caller.userId)).map(presentKeyListItem);
    },
  );

  app.delete(
    "/api_keys/:key_id",
    {
      schema: {
        tags: tags.keys,
        summary: "Revoke a personal API key",
        params: KeyParams,
        response: { 200: ApiKeyRevoked, ...errorResponses },
      },
    },
    async (request) => {
      const caller = personalPrincipal(request, "revoke personal API keys");
      const { key_id } = typed(KeyParams, request.params);
      return presentRevokedKey(await revokePersonalKey(plane, caller.userId, key_id));
    },
  );

  app.post(
    "/organizations/:org_id/api_keys",
    {
      schema: {
        tags: tags.keys,
        summary: "Create an organization API key, or a project-scoped key with project_id",
        params: OrgParams,
        body: OrgApiKeyCreateBody,
        response: { 200: ApiKeyCreated, ...errorResponses },
      },
    },
    async (request) => {
      const caller = personalPrincipal(request, "create organization API keys");
      const { org_id } = typed(OrgParams, request.params);
      const { key_name, project_id } = typed(OrgApiKeyCreateBody, request.body);
      return presentCreatedKey(await createOrganizationKey(db, caller, org_id, key_name, project_id));
    },
  );

  app.get(
    "/organizations/:org_id/api_keys",
    {
      schema: {
        tags: tags.keys,
        summary: "List an organization's API keys (administrators)",
        params: OrgParams,
        response: { 200: Type.Array(ApiKeyListItem), ...errorResponses },
      },
    },
    async (request) => {
      const caller = personalPrincipal(request, "list organization API keys");
      const { org_id } = typed(OrgParams, request.params);
      return (await listOrganizationKeys(db, caller, org_id)).map(presentKeyListItem);
    },
  );

  app.delete(
    "/organizations/:org_id/api_keys/:key_id",
    {
      schema: {
        tags: tags.keys,
        summary: "Revoke an organization or project-scoped API key (administrators)",
        params: OrgKeyParams,
        response: { 200: ApiKeyRevoked, ...errorResponses },
      },
    },
    async (request) => {
      const caller = personalPrincipal(request, "revoke organization API keys");
      const { org_id, key_id } = typed(OrgKeyParams, request.params);
      return presentRevokedKey(await revokeOrganizationKey(plane, caller, org_id, key_id));
    },
  );
}
