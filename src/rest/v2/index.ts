import type { FastifyInstance } from "fastify";
import { ControlPlane } from "../../control/control-plane.js";
import type { GatewayContext } from "../context.js";
import { accountRateLimit } from "./account-rate-limit.js";
import { apiKeyRoutes } from "./api-keys.js";
import { authenticate } from "./authentication.js";
import { registerBodyParsers } from "./body-parsers.js";
import { branchRoutes } from "./branches.js";
import { consumptionRoutes } from "./consumption.js";
import { databaseRoutes } from "./databases.js";
import { endpointRoutes } from "./endpoints.js";
import { managementErrorHandler, sendError } from "./errors.js";
import { installationRoutes } from "./installation.js";
import { operationRoutes } from "./operations.js";
import { organizationRoutes } from "./organizations.js";
import { projectPermissionRoutes } from "./project-permissions.js";
import { projectRoutes } from "./projects.js";
import { roleRoutes } from "./roles.js";
import { typeboxValidator } from "./typebox-validator.js";
import { userRoutes } from "./users.js";

/**
 * The management API v2 (spec: management-api.md; shapes of Neon's public API v2), registered under
 * `/api/v2`. Encapsulated: its own validation, `{code, message}` errors, bearer-key authentication and
 * per-account rate limits apply to its routes only (the gateway's per-IP limits do not). Does nothing when
 * the context has no management settings.
 */
export async function managementApi(app: FastifyInstance, { ctx }: { ctx: GatewayContext }) {
  const settings = ctx.management;
  if (!settings) return;
  const plane = await ControlPlane.start(ctx.db, ctx.box, settings, ctx.logger);
  app.addHook("onClose", () => plane.stop());

  app.setValidatorCompiler(typeboxValidator);
  app.setErrorHandler(managementErrorHandler);
  app.setNotFoundHandler((request, reply) =>
    sendError(
      reply,
      request,
      404,
      "NOT_FOUND",
      `route not found: ${request.method} ${request.url.split("?")[0]}`,
    ),
  );
  registerBodyParsers(app);
  app.addHook("onRoute", (route) => {
    // The gateway's per-IP limits do not apply here: these routes count per account (below).
    route.config = { ...(route.config as object), rateLimit: false };
  });
  app.decorateRequest("principal", null);
  app.addHook("onRequest", authenticate(ctx.db));
  if (ctx.config.rateLimit) {
    app.addHook(
      "onRequest",
      accountRateLimit({
        store: ctx.rateLimitStore,
        onStoreError: (error) =>
          ctx.logger.warn({ err: error }, "rate-limit store unavailable; request let through"),
      }),
    );
  }

  const options = { plane };
  await app.register(apiKeyRoutes, options);
  await app.register(organizationRoutes, options);
  await app.register(userRoutes, options);
  await app.register(installationRoutes, options);
  await app.register(projectRoutes, options);
  await app.register(projectPermissionRoutes, options);
  await app.register(branchRoutes, options);
  await app.register(databaseRoutes, options);
  await app.register(roleRoutes, options);
  await app.register(endpointRoutes, options);
  await app.register(operationRoutes, options);
  await app.register(consumptionRoutes, options);
}
