import { requireMembership } from "./api-keys.js";
import { badRequest, forbidden, notFound } from "./control-error.js";
import type { Plane } from "./plane.js";
import type { Principal } from "./principal.js";
import { revokeAccess } from "./revocation.js";

/**
 * Moves projects into an organization, from another organization (caller: administrator of both) or from the
 * caller's own account (`sourceOrgId` null; caller: member of the destination). Project-scoped keys issued by
 * the organization a project leaves stop working at once: they are valid only while their project belongs to
 * their organization; the passwords shown through keys that no longer reach a moved project are rotated
 * (revocation.ts). All or nothing; 404 if any project is not in the source.
 */
export async function transferProjects(
  plane: Plane,
  principal: Principal,
  sourceOrgId: string | null,
  destinationOrgId: string,
  projectIds: readonly string[],
): Promise<void> {
  if (principal.kind !== "personal") throw forbidden("transferring projects needs a personal API key");
  if (sourceOrgId === destinationOrgId)
    throw badRequest("the source and destination organizations are the same");
  const ids = [...new Set(projectIds)];
  await revokeAccess(plane, async (db) => {
    if (sourceOrgId !== null) await requireMembership(db, sourceOrgId, principal.userId, true);
    await requireMembership(db, destinationOrgId, principal.userId, sourceOrgId !== null);
    const { rows } = await db.query(
      `SELECT id FROM projects WHERE id = ANY($1::text[]) AND ${sourceOrgId === null ? "owner_user_id = $2" : "org_id = $2"} FOR UPDATE`,
      [ids, sourceOrgId ?? principal.userId],
    );
    const found = new Set(rows.map((row) => row.id as string));
    const missing = ids.find((id) => !found.has(id));
    if (missing) throw notFound(`project ${missing} not found`);
    await db.query(
      "UPDATE projects SET org_id = $2, owner_user_id = NULL, updated_at = clock_timestamp() WHERE id = ANY($1::text[])",
      [ids, destinationOrgId],
    );
    return { result: undefined, scope: { projectIds: ids } };
  });
}
