import type { Static, TSchema } from "@sinclair/typebox";
import type { FastifyRequest } from "fastify";
import { forbidden } from "../../control/control-error.js";
import type { Plane } from "../../control/plane.js";
import type { PersonalPrincipal } from "../../control/principal.js";
import { principalOf } from "./authentication.js";

/** What every v2 route module receives. */
export interface RouteOptions {
  plane: Plane;
}

/** The request part, typed by the schema it was validated against. */
export const typed = <T extends TSchema>(_schema: T, value: unknown) => value as Static<T>;

/** Key management and organization membership act for a user: they need a personal key (spec rule 3). */
export function personalPrincipal(request: FastifyRequest, action: string): PersonalPrincipal {
  const principal = principalOf(request);
  if (principal.kind !== "personal") {
    throw forbidden(
      principal.kind === "project"
        ? `a project-scoped API key cannot ${action}: it reaches its project only`
        : `${action} needs a personal API key`,
    );
  }
  return principal;
}

export const tags = {
  keys: ["API keys"],
  orgs: ["Organizations"],
  users: ["Users"],
  projects: ["Projects"],
  branches: ["Branches"],
  endpoints: ["Endpoints"],
  databases: ["Databases"],
  roles: ["Roles"],
  operations: ["Operations"],
};
