import { connectionUri, endpointHost } from "../../control/connection-uri.js";
import type { OperationRow } from "../../control/operations.js";
import type { DatabaseRow, EndpointRow, RoleRow } from "../../control/rows.js";
import type { ControlSettings } from "../../control/settings.js";
import { DEFAULT_BRANCH_SIZE_LIMIT_MIB } from "../../control/settings.js";
import type { BranchView, ProjectView } from "../../control/views.js";

/** Converts management rows into the records of Neon's API v2. Optional fields are left out when unset. */
const iso = (date: Date) => date.toISOString();
const optional = <K extends string>(key: K, date: Date | null | undefined) =>
  date ? { [key]: date.toISOString() } : {};
const seconds = (ms: number) => Math.floor(ms / 1000);

function consumptionPeriod(now = new Date()) {
  const start = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1));
  const end = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1));
  return { consumption_period_start: iso(start), consumption_period_end: iso(end) };
}

function projectCommon(
  { project, usage, locked, computeLastActiveAt }: ProjectView,
  settings: ControlSettings,
) {
  const limitMib = settings.branchSizeLimitMib ?? DEFAULT_BRANCH_SIZE_LIMIT_MIB;
  return {
    id: project.id,
    platform_id: "pgtoll",
    region_id: project.regionId,
    name: project.name,
    provisioner: "shared-cluster",
    default_endpoint_settings: project.defaultEndpointSettings,
    settings: project.settings,
    pg_version: project.pgVersion,
    proxy_host: settings.proxyHost,
    branch_logical_size_limit: limitMib,
    branch_logical_size_limit_bytes: limitMib * 1024 * 1024,
    store_passwords: project.storePasswords,
    locked,
    cpu_used_sec: seconds(usage.activeMs),
    creation_source: project.creationSource,
    // No history is kept, whatever an older row may hold.
    history_retention_seconds: 0,
    created_at: iso(project.createdAt),
    updated_at: iso(project.updatedAt),
    synthetic_storage_size: usage.sizeBytes,
    owner_id: project.ownerUserId ?? project.orgId ?? "",
    ...(project.orgId ? { org_id: project.orgId } : {}),
    ...optional("compute_last_active_at", computeLastActiveAt),
  };
}

export function presentProjectListItem(view: ProjectView, settings: ControlSettings) {
  return { ...projectCommon(view, settings), active_time: seconds(view.usage.sessionMs) };
}

export function presentProject(view: ProjectView, settings: ControlSettings) {
  return {
    ...projectCommon(view, settings),
    data_storage_bytes_hour: 0,
    data_transfer_bytes: 0,
    written_data_bytes: 0,
    compute_time_seconds: seconds(view.usage.activeMs),
    active_time_seconds: seconds(view.usage.sessionMs),
    ...consumptionPeriod(),
  };
}

export function presentBranch({ branch, usage }: BranchView) {
  return {
    id: branch.id,
    project_id: branch.projectId,
    ...(branch.parentId ? { parent_id: branch.parentId } : {}),
    ...(branch.parentLsn ? { parent_lsn: branch.parentLsn } : {}),
    ...optional("parent_timestamp", branch.parentTimestamp),
    name: branch.name,
    current_state: branch.currentState,
    ...(branch.pendingState ? { pending_state: branch.pendingState } : {}),
    state_changed_at: iso(branch.stateChangedAt),
    logical_size: usage.sizeBytes,
    creation_source: branch.creationSource,
    primary: branch.isDefault,
    default: branch.isDefault,
    protected: branch.protected,
    cpu_used_sec: seconds(usage.activeMs),
    compute_time_seconds: seconds(usage.activeMs),
    active_time_seconds: seconds(usage.sessionMs),
    written_data_bytes: 0,
    data_transfer_bytes: 0,
    created_at: iso(branch.createdAt),
    updated_at: iso(branch.updatedAt),
    ...optional("expires_at", branch.expiresAt),
    ...optional("last_reset_at", branch.lastResetAt),
    init_source: branch.initSource,
    created_by: { name: branch.createdByName, image: "" },
  };
}

export function presentEndpoint(endpoint: EndpointRow, settings: ControlSettings, regionId: string) {
  return {
    host: endpointHost(endpoint.id, settings.proxyHost),
    id: endpoint.id,
    ...(endpoint.name ? { name: endpoint.name } : {}),
    project_id: endpoint.projectId,
    branch_id: endpoint.branchId,
    autoscaling_limit_min_cu: endpoint.autoscalingLimitMinCu,
    autoscaling_limit_max_cu: endpoint.autoscalingLimitMaxCu,
    region_id: regionId,
    type: endpoint.type,
    current_state: endpoint.currentState,
    ...(endpoint.pendingState ? { pending_state: endpoint.pendingState } : {}),
    settings: endpoint.settings,
    pooler_enabled: endpoint.poolerEnabled,
    pooler_mode: "transaction",
    disabled: endpoint.disabled,
    passwordless_access: false,
    ...optional("last_active", endpoint.lastActive),
    creation_source: endpoint.creationSource,
    created_at: iso(endpoint.createdAt),
    updated_at: iso(endpoint.updatedAt),
    ...optional("started_at", endpoint.startedAt),
    ...optional("suspended_at", endpoint.suspendedAt),
    proxy_host: settings.proxyHost,
    suspend_timeout_seconds: endpoint.suspendTimeoutSeconds,
    provisioner: "shared-cluster",
  };
}

export function presentRole(role: RoleRow, password?: string) {
  return {
    branch_id: role.branchId,
    name: role.name,
    ...(password !== undefined ? { password } : {}),
    protected: role.protected,
    authentication_method: role.noLogin ? "no_login" : "password",
    postgres_name: role.physicalName,
    created_at: iso(role.createdAt),
    updated_at: iso(role.updatedAt),
  };
}

export function presentDatabase(database: DatabaseRow) {
  return {
    id: database.id,
    branch_id: database.branchId,
    name: database.name,
    owner_name: database.ownerName,
    created_at: iso(database.createdAt),
    updated_at: iso(database.updatedAt),
  };
}

export function presentOperation(op: OperationRow) {
  return {
    id: op.id,
    project_id: op.projectId,
    ...(op.branchId ? { branch_id: op.branchId } : {}),
    ...(op.endpointId ? { endpoint_id: op.endpointId } : {}),
    action: op.action,
    status: op.status,
    ...(op.error ? { error: op.error } : {}),
    failures_count: op.failuresCount,
    created_at: iso(op.createdAt),
    updated_at: iso(op.updatedAt),
    total_duration_ms: op.totalDurationMs,
  };
}

/** Connection details for one role and database through an endpoint, as in creation answers. */
export function presentConnection(
  settings: ControlSettings,
  target: { endpointId: string; role: string; password: string; database: string },
) {
  return {
    connection_uri: connectionUri(settings, target),
    connection_parameters: {
      database: target.database,
      password: target.password,
      role: target.role,
      host: endpointHost(target.endpointId, settings.proxyHost),
      pooler_host: endpointHost(target.endpointId, settings.proxyHost, true),
    },
  };
}
