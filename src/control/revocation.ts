import type pg from "pg";
import { projectFor } from "./access.js";
import { ControlError } from "./control-error.js";
import { principalOfKey } from "./key-principals.js";
import { type PlannedOperation, scheduleOperations } from "./operations.js";
import type { Plane } from "./plane.js";
import { lockForRevocation } from "./revocation-lock.js";
import { replacePassword } from "./role-password-rotation.js";
import { inTransaction, type Queryable } from "./sql.js";

/** Where a revocation may have left passwords in hands that no longer reach their project. */
export interface RevocationScope {
  projectIds?: readonly string[];
  /** Every project of the organization. */
  orgId?: string;
  /** Whatever these keys were shown, in any project. */
  keyIds?: readonly number[];
}

/** Whether the key still works and still reaches the project: the API's own rules (api-keys.ts, access.ts). */
async function keyReaches(db: Queryable, keyId: number, projectId: string): Promise<boolean> {
  const principal = await principalOfKey(db, keyId);
  if (!principal) return false;
  try {
    await projectFor(db, principal, projectId);
    return true;
  } catch (error) {
    if (error instanceof ControlError && error.statusCode === 404) return false;
    throw error;
  }
}

/**
 * Rotates, in the caller's transaction, the password of every role in `scope` whose current password was shown
 * through a key that can no longer reach the project (see password-disclosures.ts), and schedules what sets the
 * new passwords on the cluster and ends those roles' sessions. Returns the projects whose operations to run.
 */
export async function rotateLapsedPasswords(
  db: Queryable,
  plane: Pick<Plane, "box" | "instanceId">,
  scope: RevocationScope,
): Promise<string[]> {
  const { rows } = await db.query<{ project_id: string; role_name: string; api_key_id: string }>(
    `SELECT DISTINCT d.project_id, d.role_name, d.api_key_id FROM role_password_disclosures d
       JOIN project_roles r ON r.project_id = d.project_id AND r.name = d.role_name
        AND r.password_generation = d.password_generation AND r.password_sealed IS NOT NULL
      WHERE d.project_id = ANY($1::text[]) OR d.api_key_id = ANY($2::bigint[])
         OR d.project_id IN (SELECT id FROM projects WHERE org_id = $3)
      ORDER BY d.project_id, d.role_name`,
    [scope.projectIds ?? [], scope.keyIds ?? [], scope.orgId ?? null],
  );
  const reaches = new Map<string, Promise<boolean>>();
  const lapsed = new Map<string, Set<string>>();
  for (const row of rows) {
    const pair = `${row.api_key_id}/${row.project_id}`;
    if (!reaches.has(pair)) reaches.set(pair, keyReaches(db, Number(row.api_key_id), row.project_id));
    if (await reaches.get(pair)) continue;
    lapsed.set(row.project_id, (lapsed.get(row.project_id) ?? new Set()).add(row.role_name));
  }
  for (const [projectId, roles] of lapsed) {
    const planned: PlannedOperation[] = [];
    for (const role of roles) planned.push((await replacePassword(db, plane.box, projectId, role)).planned);
    await scheduleOperations(db, projectId, planned, plane.instanceId);
  }
  return [...lapsed.keys()];
}

/**
 * The shape of every revocation (a share, a member, a key, a transfer): in one transaction, `work` takes the
 * access away and names where to look, and every password shown through access that is gone is rotated; after
 * the commit the rotations run (waiting as a change does), which ends the sessions of those roles.
 */
export async function revokeAccess<T>(
  plane: Plane,
  work: (client: pg.PoolClient) => Promise<{ result: T; scope: RevocationScope }>,
): Promise<T> {
  const { result, projects } = await inTransaction(plane.db, async (client) => {
    await lockForRevocation(client);
    const { result, scope } = await work(client);
    return { result, projects: await rotateLapsedPasswords(client, plane, scope) };
  });
  await Promise.all(projects.map((projectId) => plane.awaitOperations(projectId)));
  return result;
}
