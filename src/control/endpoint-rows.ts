import { SqlState } from "../db/sql-state.js";
import { computeUnits } from "./compute-units.js";
import { badRequest, conflict } from "./control-error.js";
import { newEndpointId } from "./ids.js";
import type { PlannedOperation } from "./operations.js";
import type { EndpointType, ProjectRow } from "./rows.js";
import { type Queryable, sqlState } from "./sql.js";

export interface EndpointInput {
  type: string;
  name?: string;
  autoscaling_limit_min_cu?: number;
  autoscaling_limit_max_cu?: number;
  suspend_timeout_seconds?: number;
  settings?: Record<string, unknown>;
  disabled?: boolean;
  pooler_enabled?: boolean;
  region_id?: string;
  passwordless_access?: boolean;
}

/**
 * Neon's passwordless access (a login without a password) does not exist here: asking for it is refused
 * rather than ignored, so a client never believes it has it.
 */
export function refusePasswordlessAccess(input: { passwordless_access?: boolean }): void {
  if (input.passwordless_access === true)
    throw badRequest("passwordless_access is not available: endpoints are reached with a role's password");
}

export function checkEndpointType(type: string): EndpointType {
  if (type !== "read_write" && type !== "read_only")
    throw badRequest(`endpoint type must be read_write or read_only, got "${type}"`);
  return type;
}

/**
 * Inserts an endpoint of `branchId` (state init, then active once its start_compute operation ran) and returns
 * the operation that starts it. A branch has at most one read_write endpoint: 409 for a second.
 */
export async function insertEndpoint(
  db: Queryable,
  project: ProjectRow,
  branchId: string,
  input: EndpointInput,
): Promise<{ endpointId: string; planned: PlannedOperation }> {
  const type = checkEndpointType(input.type);
  refusePasswordlessAccess(input);
  if (input.region_id !== undefined && input.region_id !== project.regionId) {
    throw badRequest(`an endpoint must be in its project's region ${project.regionId}`);
  }
  const defaults = computeUnits({ ...project.defaultEndpointSettings, ...input });
  if (defaults.min > defaults.max)
    throw badRequest("autoscaling_limit_min_cu cannot exceed autoscaling_limit_max_cu");
  const endpointId = newEndpointId();
  try {
    await db.query(
      `INSERT INTO endpoints (id, project_id, branch_id, name, type, current_state, pending_state, autoscaling_limit_min_cu,
         autoscaling_limit_max_cu, suspend_timeout_seconds, settings, disabled, pooler_enabled, creation_source)
       VALUES ($1, $2, $3, $4, $5, 'init', $6, $7, $8, $9, $10, $11, $12, 'api')`,
      [
        endpointId,
        project.id,
        branchId,
        input.name ?? null,
        type,
        input.disabled ? "idle" : "active",
        defaults.min,
        defaults.max,
        defaults.suspend,
        JSON.stringify(input.settings ?? {}),
        input.disabled ?? false,
        input.pooler_enabled ?? false,
      ],
    );
  } catch (error) {
    if (sqlState(error) === SqlState.uniqueViolation)
      throw conflict(`branch ${branchId} already has a read_write endpoint`);
    throw error;
  }
  const step = input.disabled
    ? { kind: "suspend_endpoint" as const, endpointId }
    : { kind: "start_endpoint" as const, endpointId };
  return {
    endpointId,
    planned: { action: input.disabled ? "suspend_compute" : "start_compute", branchId, endpointId, step },
  };
}
