import { type TSchema, Type } from "@sinclair/typebox";
import { ID_PATTERN } from "../../../control/ids.js";

/** Shapes shared by the v2 routes (Neon's public API v2), also their OpenAPI document. */
export const Id = Type.String({ pattern: ID_PATTERN, description: "identifier, matching ^[a-z0-9-]{1,60}$" });
export const Timestamp = Type.String({ format: "date-time", description: "ISO 8601 UTC timestamp" });
export const Nullable = <T extends TSchema>(schema: T) => Type.Union([schema, Type.Null()]);
export const AnyObject = Type.Object({}, { additionalProperties: true });

export const GeneralError = Type.Object(
  {
    request_id: Type.Optional(Type.String()),
    code: Type.String({ description: "machine-readable error code, e.g. NOT_FOUND, LOCKED" }),
    message: Type.String(),
  },
  { description: "every error answer of the management API" },
);

/** Error answers every authenticated route may give. */
export const errorResponses = {
  400: GeneralError,
  401: GeneralError,
  403: GeneralError,
  404: GeneralError,
  423: GeneralError,
  429: GeneralError,
  500: GeneralError,
};

export const ProjectParams = Type.Object({ project_id: Id });
export const BranchParams = Type.Object({ project_id: Id, branch_id: Id });

export const Operation = Type.Object({
  id: Type.String({ format: "uuid" }),
  project_id: Type.String(),
  branch_id: Type.Optional(Type.String()),
  endpoint_id: Type.Optional(Type.String()),
  action: Type.String({
    description:
      "create_timeline, create_branch, delete_timeline, start_compute, suspend_compute, apply_config",
  }),
  status: Type.String({ description: "scheduling, running, finished, failed, cancelled, skipped" }),
  error: Type.Optional(Type.String()),
  failures_count: Type.Integer(),
  created_at: Timestamp,
  updated_at: Timestamp,
  total_duration_ms: Type.Integer(),
});
export const Operations = Type.Array(Operation);
