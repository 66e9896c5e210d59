import { Type } from "@sinclair/typebox";
import { AnyObject, Timestamp } from "./common.js";

export const Branch = Type.Object({
  id: Type.String(),
  project_id: Type.String(),
  parent_id: Type.Optional(Type.String()),
  parent_lsn: Type.Optional(
    Type.String({ description: "WAL position of the parent when the copy was taken" }),
  ),
  parent_timestamp: Type.Optional(Timestamp),
  name: Type.String(),
  current_state: Type.String({ description: "init, ready or resetting" }),
  pending_state: Type.Optional(Type.String()),
  state_changed_at: Timestamp,
  logical_size: Type.Integer({ description: "bytes on disk of the branch's databases" }),
  creation_source: Type.String(),
  primary: Type.Boolean(),
  default: Type.Boolean(),
  protected: Type.Boolean(),
  cpu_used_sec: Type.Integer(),
  compute_time_seconds: Type.Integer(),
  active_time_seconds: Type.Integer(),
  written_data_bytes: Type.Integer(),
  data_transfer_bytes: Type.Integer(),
  created_at: Timestamp,
  updated_at: Timestamp,
  expires_at: Type.Optional(Timestamp),
  last_reset_at: Type.Optional(Timestamp),
  init_source: Type.String({ description: "parent-data or schema-only" }),
  created_by: Type.Object({ name: Type.String(), image: Type.String() }),
});

export const Endpoint = Type.Object({
  host: Type.String({ description: "<endpoint_id>.<proxy host>" }),
  id: Type.String(),
  name: Type.Optional(Type.String()),
  project_id: Type.String(),
  branch_id: Type.String(),
  autoscaling_limit_min_cu: Type.Number(),
  autoscaling_limit_max_cu: Type.Number(),
  region_id: Type.String(),
  type: Type.String({ description: "read_write or read_only" }),
  current_state: Type.String({ description: "init, active or idle" }),
  pending_state: Type.Optional(Type.String()),
  settings: AnyObject,
  pooler_enabled: Type.Boolean(),
  pooler_mode: Type.String(),
  disabled: Type.Boolean(),
  passwordless_access: Type.Boolean(),
  last_active: Type.Optional(Timestamp),
  creation_source: Type.String(),
  created_at: Timestamp,
  updated_at: Timestamp,
  started_at: Type.Optional(Timestamp),
  suspended_at: Type.Optional(Timestamp),
  proxy_host: Type.String(),
  suspend_timeout_seconds: Type.Integer(),
  provisioner: Type.String(),
});

export const Role = Type.Object({
  branch_id: Type.String(),
  name: Type.String(),
  password: Type.Optional(Type.String()),
  protected: Type.Boolean(),
  authentication_method: Type.String({ description: "password or no_login" }),
  postgres_name: Type.String({
    description:
      "the role's name inside PostgreSQL (what current_user says, what GRANT takes): random, so that other projects on the cluster do not see the name chosen here",
  }),
  created_at: Timestamp,
  updated_at: Timestamp,
});

export const Database = Type.Object({
  id: Type.Integer(),
  branch_id: Type.String(),
  name: Type.String(),
  owner_name: Type.String(),
  created_at: Timestamp,
  updated_at: Timestamp,
});

export const ConnectionDetails = Type.Object({
  connection_uri: Type.String(),
  connection_parameters: Type.Object({
    database: Type.String(),
    password: Type.String(),
    role: Type.String(),
    host: Type.String(),
    pooler_host: Type.String(),
  }),
});
