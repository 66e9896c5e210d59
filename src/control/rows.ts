/** Metadata rows of the management plane, as the control functions pass them around. */

export interface ProjectRow {
  id: string;
  name: string;
  ownerUserId: string | null;
  orgId: string | null;
  regionId: string;
  pgVersion: number;
  rolePrefix: string;
  storePasswords: boolean;
  historyRetentionSeconds: number;
  settings: Record<string, unknown>;
  defaultEndpointSettings: Record<string, unknown>;
  creationSource: string;
  retiredActiveMs: number;
  retiredSessionMs: number;
  createdAt: Date;
  updatedAt: Date;
}

export type BranchState = "init" | "ready" | "resetting";
export type InitSource = "parent-data" | "schema-only";

export interface BranchRow {
  id: string;
  projectId: string;
  parentId: string | null;
  name: string;
  isDefault: boolean;
  protected: boolean;
  initSource: InitSource;
  currentState: BranchState;
  pendingState: BranchState | null;
  stateChangedAt: Date;
  parentLsn: string | null;
  parentTimestamp: Date | null;
  lastResetAt: Date | null;
  expiresAt: Date | null;
  creationSource: string;
  createdByName: string;
  createdAt: Date;
  updatedAt: Date;
}

export type EndpointType = "read_write" | "read_only";
export type EndpointState = "init" | "active" | "idle";

export interface EndpointRow {
  id: string;
  projectId: string;
  branchId: string;
  name: string | null;
  type: EndpointType;
  currentState: EndpointState;
  pendingState: EndpointState | null;
  autoscalingLimitMinCu: number;
  autoscalingLimitMaxCu: number;
  suspendTimeoutSeconds: number;
  settings: Record<string, unknown>;
  disabled: boolean;
  poolerEnabled: boolean;
  creationSource: string;
  lastActive: Date | null;
  startedAt: Date | null;
  suspendedAt: Date | null;
  createdAt: Date;
  updatedAt: Date;
}

export interface DatabaseRow {
  id: number;
  branchId: string;
  name: string;
  ownerName: string;
  physicalName: string;
  createdAt: Date;
  updatedAt: Date;
}

export interface RoleRow {
  branchId: string;
  projectId: string;
  name: string;
  protected: boolean;
  noLogin: boolean;
  physicalName: string;
  passwordSealed: string | null;
  createdAt: Date;
  updatedAt: Date;
}

type Row = Record<string, unknown>;
const date = (value: unknown) => (value as Date | null) ?? null;

export const toProject = (r: Row): ProjectRow => ({
  id: r.id as string,
  name: r.name as string,
  ownerUserId: (r.owner_user_id as string | null) ?? null,
  orgId: (r.org_id as string | null) ?? null,
  regionId: r.region_id as string,
  pgVersion: r.pg_version as number,
  rolePrefix: r.role_prefix as string,
  storePasswords: r.store_passwords as boolean,
  historyRetentionSeconds: r.history_retention_seconds as number,
  settings: r.settings as Record<string, unknown>,
  defaultEndpointSettings: r.default_endpoint_settings as Record<string, unknown>,
  creationSource: r.creation_source as string,
  retiredActiveMs: r.retired_active_ms as number,
  retiredSessionMs: r.retired_session_ms as number,
  createdAt: r.created_at as Date,
  updatedAt: r.updated_at as Date,
});

export const toBranch = (r: Row): BranchRow => ({
  id: r.id as string,
  projectId: r.project_id as string,
  parentId: (r.parent_id as string | null) ?? null,
  name: r.name as string,
  isDefault: r.is_default as boolean,
  protected: r.protected as boolean,
  initSource: r.init_source as InitSource,
  currentState: r.current_state as BranchState,
  pendingState: (r.pending_state as BranchState | null) ?? null,
  stateChangedAt: r.state_changed_at as Date,
  parentLsn: (r.parent_lsn as string | null) ?? null,
  parentTimestamp: date(r.parent_timestamp),
  lastResetAt: date(r.last_reset_at),
  expiresAt: date(r.expires_at),
  creationSource: r.creation_source as string,
  createdByName: r.created_by_name as string,
  createdAt: r.created_at as Date,
  updatedAt: r.updated_at as Date,
});

export const toEndpoint = (r: Row): EndpointRow => ({
  id: r.id as string,
  projectId: r.project_id as string,
  branchId: r.branch_id as string,
  name: (r.name as string | null) ?? null,
  type: r.type as EndpointType,
  currentState: r.current_state as EndpointState,
  pendingState: (r.pending_state as EndpointState | null) ?? null,
  autoscalingLimitMinCu: r.autoscaling_limit_min_cu as number,
  autoscalingLimitMaxCu: r.autoscaling_limit_max_cu as number,
  suspendTimeoutSeconds: r.suspend_timeout_seconds as number,
  settings: r.settings as Record<string, unknown>,
  disabled: r.disabled as boolean,
  poolerEnabled: r.pooler_enabled as boolean,
  creationSource: r.creation_source as string,
  lastActive: date(r.last_active),
  startedAt: date(r.started_at),
  suspendedAt: date(r.suspended_at),
  createdAt: r.created_at as Date,
  updatedAt: r.updated_at as Date,
});

export const toDatabase = (r: Row): DatabaseRow => ({
  id: Number(r.id),
  branchId: r.branch_id as string,
  name: r.name as string,
  ownerName: r.owner_name as string,
  physicalName: r.physical_name as string,
  createdAt: r.created_at as Date,
  updatedAt: r.updated_at as Date,
});

export const toRole = (r: Row): RoleRow => ({
  branchId: r.branch_id as string,
  projectId: r.project_id as string,
  name: r.name as string,
  protected: r.protected as boolean,
  noLogin: r.no_login as boolean,
  physicalName: r.physical_name as string,
  passwordSealed: (r.password_sealed as string | null) ?? null,
  createdAt: r.created_at as Date,
  updatedAt: r.updated_at as Date,
});
