import { forbidden, notFound } from "./control-error.js";
import { getOrganization, type MemberRole, membershipOf, type Organization } from "./organizations.js";
import type { Principal } from "./principal.js";
import type { Queryable } from "./sql.js";

/**
 * The organization as the caller sees it, with the caller's role in it: a personal key's user must be a
 * member; an organization key sees its own organization, as an admin; a project-scoped key performs no
 * organization actions. 404 for an organization the caller cannot see.
 */
export async function organizationFor(
  db: Queryable,
  principal: Principal,
  orgId: string,
): Promise<{ organization: Organization; role: MemberRole; userId: string | null }> {
  if (principal.kind === "project")
    throw forbidden("a project-scoped API key cannot perform organization actions");
  const hidden = notFound(`organization ${orgId} not found`);
  if (principal.kind === "organization" && principal.orgId !== orgId) throw hidden;
  const organization = await getOrganization(db, orgId);
  if (!organization) throw hidden;
  if (principal.kind === "organization") return { organization, role: "admin", userId: null };
  const membership = await membershipOf(db, orgId, principal.userId);
  if (!membership) throw hidden;
  return { organization, role: membership.role, userId: principal.userId };
}
