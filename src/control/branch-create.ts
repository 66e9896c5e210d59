import { checkDoesNotExpire, parseExpiresAt } from "./branch-expiry-rules.js";
import type { BranchCreateInput } from "./branch-inputs.js";
import { actorName, checkInitSource, insertBranch, mirrorContents, NO_HISTORY } from "./branch-rows.js";
import { changeProject } from "./change.js";
import { badRequest, conflict } from "./control-error.js";
import { insertEndpoint } from "./endpoint-rows.js";
import { newBranchId } from "./ids.js";
import { defaultBranch, getBranch } from "./lookups.js";
import { checkBranchName } from "./names.js";
import type { PlannedOperation } from "./operations.js";
import type { Plane } from "./plane.js";
import type { Principal } from "./principal.js";

/**
 * Creates a branch of `parent_id` (default: the project's default branch): a real copy of each of the parent's
 * databases, with its data (`parent-data`, the default) or its schema only (`schema-only`), and the parent's
 * roles; plus the endpoints asked for. How the copy stays consistent while the parent is in use: fence.ts.
 */
export async function createBranch(
  plane: Plane,
  principal: Principal,
  projectId: string,
  input: BranchCreateInput,
) {
  const options = input.branch ?? {};
  if (options.parent_lsn !== undefined || options.parent_timestamp !== undefined)
    throw badRequest(NO_HISTORY);
  const initSource = checkInitSource(options.init_source);
  const endpoints = input.endpoints ?? [];
  if (endpoints.filter((e) => e.type === "read_write").length > 1)
    throw conflict("a branch has at most one read_write endpoint");
  const branchId = newBranchId();
  const name = checkBranchName(options.name ?? branchId);
  const expiresAt = parseExpiresAt(options.expires_at) ?? null;
  if (expiresAt && options.protected)
    throw badRequest("a protected branch cannot expire: give protected or expires_at, not both");
  const { operations } = await changeProject(plane, principal, projectId, async (client, { project }) => {
    const parent = options.parent_id
      ? await getBranch(client, projectId, options.parent_id)
      : await defaultBranch(client, projectId);
    if (parent.currentState !== "ready")
      throw conflict(`parent branch ${parent.id} is not ready (${parent.currentState})`);
    checkDoesNotExpire(parent, "a parent");
    await insertBranch(client, {
      id: branchId,
      projectId,
      parentId: parent.id,
      name,
      protected: options.protected,
      initSource,
      state: "init",
      pendingState: "ready",
      expiresAt,
      createdBy: await actorName(client, principal),
    });
    await mirrorContents(client, project, parent.id, branchId);
    const planned: PlannedOperation[] = [
      {
        action: "create_branch",
        branchId,
        step: { kind: "copy_branch", branchId, parentId: parent.id, initSource },
      },
    ];
    for (const endpoint of endpoints)
      planned.push((await insertEndpoint(client, project, branchId, endpoint)).planned);
    return { result: undefined, planned };
  });
  return { branch: await getBranch(plane.db, projectId, branchId), operations };
}
