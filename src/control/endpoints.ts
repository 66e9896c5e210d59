import { SqlState } from "../db/sql-state.js";
import { projectFor } from "./access.js";
import { changeProject } from "./change.js";
import { badRequest, conflict } from "./control-error.js";
import { type EndpointInput, insertEndpoint, refusePasswordlessAccess } from "./endpoint-rows.js";
import { endpointsOfBranch, endpointsOfProject, getBranch, getEndpoint } from "./lookups.js";
import type { PlannedOperation } from "./operations.js";
import type { Plane } from "./plane.js";
import type { Principal } from "./principal.js";
import type { EndpointRow } from "./rows.js";
import { type Queryable, sqlState } from "./sql.js";

export interface EndpointUpdateInput {
  branch_id?: string;
  name?: string;
  autoscaling_limit_min_cu?: number;
  autoscaling_limit_max_cu?: number;
  suspend_timeout_seconds?: number;
  settings?: Record<string, unknown>;
  disabled?: boolean;
  pooler_enabled?: boolean;
  passwordless_access?: boolean;
}

export async function listEndpoints(
  db: Queryable,
  principal: Principal,
  projectId: string,
  branchId?: string,
): Promise<EndpointRow[]> {
  await projectFor(db, principal, projectId);
  if (branchId === undefined) return endpointsOfProject(db, projectId);
  await getBranch(db, projectId, branchId);
  return endpointsOfBranch(db, branchId);
}

export async function readEndpoint(
  db: Queryable,
  principal: Principal,
  projectId: string,
  endpointId: string,
): Promise<EndpointRow> {
  await projectFor(db, principal, projectId);
  return getEndpoint(db, projectId, endpointId);
}

/** Creates an endpoint (compute) of a branch: read_write (at most one per branch) or read_only. */
export async function createEndpoint(
  plane: Plane,
  principal: Principal,
  projectId: string,
  input: EndpointInput & { branch_id: string },
) {
  const { result, operations } = await changeProject(
    plane,
    principal,
    projectId,
    async (client, { project }) => {
      await getBranch(client, projectId, input.branch_id, true);
      const { endpointId, planned } = await insertEndpoint(client, project, input.branch_id, input);
      return { result: endpointId, planned: [planned] };
    },
  );
  return { endpoint: await getEndpoint(plane.db, projectId, result), operations };
}

const start = (e: EndpointRow): PlannedOperation => ({
  action: "start_compute",
  branchId: e.branchId,
  endpointId: e.id,
  step: { kind: "start_endpoint", endpointId: e.id },
});
const suspend = (e: EndpointRow): PlannedOperation => ({
  action: "suspend_compute",
  branchId: e.branchId,
  endpointId: e.id,
  step: { kind: "suspend_endpoint", endpointId: e.id },
});

/**
 * Changes an endpoint's settings, moves it to another branch, or disables it (a disabled endpoint is
 * suspended and cannot be started until enabled again).
 */
export async function updateEndpoint(
  plane: Plane,
  principal: Principal,
  projectId: string,
  endpointId: string,
  input: EndpointUpdateInput,
) {
  refusePasswordlessAccess(input);
  const { operations } = await changeProject(plane, principal, projectId, async (client) => {
    const endpoint = await getEndpoint(client, projectId, endpointId, true);
    if (input.branch_id !== undefined) await getBranch(client, projectId, input.branch_id);
    const min = input.autoscaling_limit_min_cu ?? endpoint.autoscalingLimitMinCu;
    const max = input.autoscaling_limit_max_cu ?? endpoint.autoscalingLimitMaxCu;
    if (min > max) throw badRequest("autoscaling_limit_min_cu cannot exceed autoscaling_limit_max_cu");
    const disabled = input.disabled ?? endpoint.disabled;
    try {
      await client.query(
        `UPDATE endpoints SET branch_id = $2, name = $3, autoscaling_limit_min_cu = $4, autoscaling_limit_max_cu = $5,
           suspend_timeout_seconds = $6, settings = $7, disabled = $8, pooler_enabled = $9, updated_at = clock_timestamp(),
           pending_state = CASE WHEN $8 AND NOT disabled THEN 'idle' WHEN $10 THEN 'active' ELSE pending_state END
         WHERE id = $1`,
        [
          endpointId,
          input.branch_id ?? endpoint.branchId,
          input.name ?? endpoint.name,
          min,
          max,
          input.suspend_timeout_seconds ?? endpoint.suspendTimeoutSeconds,
          JSON.stringify(
            input.settings === undefined ? endpoint.settings : { ...endpoint.settings, ...input.settings },
          ),
          disabled,
          input.pooler_enabled ?? endpoint.poolerEnabled,
          input.branch_id !== undefined && input.branch_id !== endpoint.branchId && !disabled,
        ],
      );
    } catch (error) {
      if (sqlState(error) === SqlState.uniqueViolation)
        throw conflict(`branch ${input.branch_id} already has a read_write endpoint`);
      throw error;
    }
    const moved = input.branch_id !== undefined && input.branch_id !== endpoint.branchId;
    const planned: PlannedOperation[] = [];
    if (disabled && !endpoint.disabled) planned.push(suspend(endpoint));
    else if (moved && endpoint.currentState === "active")
      planned.push(suspend(endpoint), start({ ...endpoint, branchId: input.branch_id! }));
    else
      planned.push({
        action: "apply_config",
        branchId: endpoint.branchId,
        endpointId,
        step: { kind: "noop" },
      });
    return { result: undefined, planned };
  });
  return { endpoint: await getEndpoint(plane.db, projectId, endpointId), operations };
}

/** Deletes an endpoint; the sessions opened through it end. */
export async function deleteEndpoint(
  plane: Plane,
  principal: Principal,
  projectId: string,
  endpointId: string,
) {
  const { result, operations } = await changeProject(plane, principal, projectId, async (client) => {
    const endpoint = await getEndpoint(client, projectId, endpointId, true);
    await client.query("DELETE FROM endpoints WHERE id = $1", [endpointId]);
    return { result: endpoint, planned: [suspend(endpoint)] };
  });
  return { endpoint: result, operations };
}

/** Starts a suspended endpoint (409 when it is disabled). */
export function startEndpoint(plane: Plane, principal: Principal, projectId: string, endpointId: string) {
  return changeEndpointState(plane, principal, projectId, endpointId, async (client, endpoint) => {
    if (endpoint.disabled)
      throw conflict(`endpoint ${endpointId} is disabled: enable it (disabled: false) before starting it`);
    await setPendingState(client, endpointId, "active");
    return [start(endpoint)];
  });
}

/** Suspends an endpoint: its sessions end, and it refuses connections until started again. */
export function suspendEndpoint(plane: Plane, principal: Principal, projectId: string, endpointId: string) {
  return changeEndpointState(plane, principal, projectId, endpointId, async (client, endpoint) => {
    await setPendingState(client, endpointId, "idle");
    return [suspend(endpoint)];
  });
}

/** Ends the endpoint's sessions and starts it again. */
export function restartEndpoint(plane: Plane, principal: Principal, projectId: string, endpointId: string) {
  return changeEndpointState(plane, principal, projectId, endpointId, async (_client, endpoint) => {
    if (endpoint.disabled) throw conflict(`endpoint ${endpointId} is disabled`);
    return [suspend(endpoint), start(endpoint)];
  });
}

/** One start/suspend/restart: `plan` checks the locked endpoint and returns its operations. */
async function changeEndpointState(
  plane: Plane,
  principal: Principal,
  projectId: string,
  endpointId: string,
  plan: (client: Queryable, endpoint: EndpointRow) => Promise<PlannedOperation[]>,
) {
  const { operations } = await changeProject(plane, principal, projectId, async (client) => {
    const endpoint = await getEndpoint(client, projectId, endpointId, true);
    return { result: undefined, planned: await plan(client, endpoint) };
  });
  return { endpoint: await getEndpoint(plane.db, projectId, endpointId), operations };
}

function setPendingState(client: Queryable, endpointId: string, state: "active" | "idle") {
  return client.query(
    "UPDATE endpoints SET pending_state = $2, updated_at = clock_timestamp() WHERE id = $1",
    [endpointId, state],
  );
}
