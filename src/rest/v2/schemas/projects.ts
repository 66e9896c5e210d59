import { Type } from "@sinclair/typebox";
import { AnyObject, Id, Operations, Timestamp } from "./common.js";
import { Branch, ConnectionDetails, Database, Endpoint, Role } from "./resources.js";

const ProjectCommon = {
  id: Type.String(),
  platform_id: Type.String({ description: "always pgtoll: the platform that hosts the project" }),
  region_id: Type.String({ description: "the installation's region (PGTOLL_REGION)" }),
  name: Type.String(),
  provisioner: Type.String({
    description: "how computes are provided: shared-cluster (databases on one PostgreSQL cluster)",
  }),
  default_endpoint_settings: AnyObject,
  settings: AnyObject,
  pg_version: Type.Integer({ description: "major version of the cluster that hosts the project" }),
  proxy_host: Type.String({
    description: "host name of the wire proxy; endpoint hosts are <endpoint_id>.<proxy_host>",
  }),
  branch_logical_size_limit: Type.Integer({ description: "advisory size limit of a branch, MiB" }),
  branch_logical_size_limit_bytes: Type.Integer(),
  store_passwords: Type.Boolean(),
  locked: Type.Boolean({ description: "operations are in progress: a change now would get 423" }),
  cpu_used_sec: Type.Integer({ description: "seconds the project's databases spent executing statements" }),
  creation_source: Type.String(),
  history_retention_seconds: Type.Integer({ description: "always 0: no point-in-time history is kept" }),
  created_at: Timestamp,
  updated_at: Timestamp,
  synthetic_storage_size: Type.Integer({ description: "bytes on disk of the project's databases" }),
  owner_id: Type.String(),
  org_id: Type.Optional(Type.String()),
  compute_last_active_at: Type.Optional(Timestamp),
};

export const ProjectListItem = Type.Object({
  ...ProjectCommon,
  active_time: Type.Integer({ description: "seconds sessions were connected to the project's databases" }),
});

export const Project = Type.Object({
  ...ProjectCommon,
  data_storage_bytes_hour: Type.Integer(),
  data_transfer_bytes: Type.Integer(),
  written_data_bytes: Type.Integer(),
  compute_time_seconds: Type.Integer(),
  active_time_seconds: Type.Integer(),
  consumption_period_start: Timestamp,
  consumption_period_end: Timestamp,
});

export const ProjectCreateBody = Type.Object({
  project: Type.Object({
    name: Type.Optional(Type.String({ minLength: 1, maxLength: 256 })),
    region_id: Type.Optional(Type.String()),
    pg_version: Type.Optional(Type.Integer()),
    org_id: Type.Optional(Id),
    store_passwords: Type.Optional(Type.Boolean()),
    history_retention_seconds: Type.Optional(Type.Integer({ minimum: 0, maximum: 2_592_000 })),
    settings: Type.Optional(AnyObject),
    default_endpoint_settings: Type.Optional(AnyObject),
    autoscaling_limit_min_cu: Type.Optional(Type.Number()),
    autoscaling_limit_max_cu: Type.Optional(Type.Number()),
    provisioner: Type.Optional(Type.String()),
    branch: Type.Optional(
      Type.Object({
        name: Type.Optional(Type.String({ minLength: 1, maxLength: 256 })),
        role_name: Type.Optional(Type.String()),
        database_name: Type.Optional(Type.String()),
      }),
    ),
  }),
});

export const ProjectUpdateBody = Type.Object({
  project: Type.Object({
    name: Type.Optional(Type.String({ minLength: 1, maxLength: 256 })),
    settings: Type.Optional(AnyObject),
    default_endpoint_settings: Type.Optional(AnyObject),
    history_retention_seconds: Type.Optional(Type.Integer({ minimum: 0, maximum: 2_592_000 })),
  }),
});

export const ProjectListQuery = Type.Object({
  cursor: Type.Optional(Type.String()),
  limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 400, default: 10 })),
  search: Type.Optional(Type.String()),
  org_id: Type.Optional(Id),
  timeout: Type.Optional(Type.Integer()),
  recoverable: Type.Optional(Type.Boolean()),
});

export const ProjectList = Type.Object({
  projects: Type.Array(ProjectListItem),
  pagination: Type.Optional(Type.Object({ cursor: Type.String() })),
  applications: AnyObject,
  integrations: AnyObject,
});

export const ProjectCreated = Type.Object({
  project: Project,
  connection_uris: Type.Array(ConnectionDetails),
  roles: Type.Array(Role),
  databases: Type.Array(Database),
  operations: Operations,
  branch: Branch,
  endpoints: Type.Array(Endpoint),
});

export const ConnectionUriQuery = Type.Object({
  branch_id: Type.Optional(Id),
  endpoint_id: Type.Optional(Id),
  database_name: Type.String({ minLength: 1 }),
  role_name: Type.String({ minLength: 1 }),
  pooled: Type.Optional(Type.Boolean()),
});
