import { Type } from "@sinclair/typebox";
import { AnyObject, Id, Operations } from "./common.js";
import { Branch, ConnectionDetails, Database, Endpoint, Role } from "./resources.js";

export const EndpointOptions = Type.Object({
  type: Type.String({ description: "read_write or read_only" }),
  name: Type.Optional(Type.String({ minLength: 1, maxLength: 64 })),
  autoscaling_limit_min_cu: Type.Optional(Type.Number({ minimum: 0.25 })),
  autoscaling_limit_max_cu: Type.Optional(Type.Number({ minimum: 0.25 })),
  suspend_timeout_seconds: Type.Optional(Type.Integer({ minimum: -1, maximum: 604_800 })),
  settings: Type.Optional(AnyObject),
  provisioner: Type.Optional(Type.String()),
  passwordless_access: Type.Optional(Type.Boolean({ description: "not available: true is refused" })),
});

/**
 * `expires_at` as a request gives it. No `format` here: TypeBox knows no `date-time` format and would refuse
 * every value; the control plane checks it (branch-expiry-rules.ts) and says what is wrong.
 */
const ExpiresAt = Type.String({
  description:
    "RFC 3339 timestamp with a time zone, in the future and at most 30 days ahead: the branch is deleted then",
  examples: ["2025-07-15T18:02:16Z"],
});

export const BranchCreateBody = Type.Object({
  branch: Type.Optional(
    Type.Object({
      name: Type.Optional(Type.String({ minLength: 1, maxLength: 256 })),
      parent_id: Type.Optional(Id),
      parent_lsn: Type.Optional(Type.String()),
      parent_timestamp: Type.Optional(Type.String()),
      protected: Type.Optional(Type.Boolean()),
      archived: Type.Optional(Type.Boolean()),
      init_source: Type.Optional(Type.String({ description: "parent-data (default) or schema-only" })),
      expires_at: Type.Optional(ExpiresAt),
    }),
  ),
  endpoints: Type.Optional(Type.Array(EndpointOptions, { maxItems: 10 })),
});

export const BranchCreated = Type.Object({
  branch: Branch,
  endpoints: Type.Array(Endpoint),
  operations: Operations,
  roles: Type.Array(Role),
  databases: Type.Array(Database),
  connection_uris: Type.Optional(Type.Array(ConnectionDetails)),
});

export const BranchListQuery = Type.Object({
  search: Type.Optional(Type.String()),
  sort_by: Type.Optional(
    Type.Union([Type.Literal("name"), Type.Literal("created_at"), Type.Literal("updated_at")]),
  ),
  sort_order: Type.Optional(Type.Union([Type.Literal("asc"), Type.Literal("desc")])),
  cursor: Type.Optional(Type.String()),
  limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 10_000 })),
});

export const BranchList = Type.Object({
  branches: Type.Array(Branch),
  annotations: AnyObject,
  pagination: Type.Optional(
    Type.Object({ next: Type.Optional(Type.String()), sort_by: Type.String(), sort_order: Type.String() }),
  ),
});

export const BranchUpdateBody = Type.Object({
  branch: Type.Object({
    name: Type.Optional(Type.String({ minLength: 1, maxLength: 256 })),
    protected: Type.Optional(Type.Boolean()),
    expires_at: Type.Optional(Type.Union([ExpiresAt, Type.Null()], { description: "null: no expiry" })),
  }),
});

export const BranchRestoreBody = Type.Object({
  source_branch_id: Id,
  source_lsn: Type.Optional(Type.String()),
  source_timestamp: Type.Optional(Type.String()),
  preserve_under_name: Type.Optional(Type.String({ minLength: 1, maxLength: 256 })),
});

export const BranchOperations = Type.Object({ branch: Branch, operations: Operations });
