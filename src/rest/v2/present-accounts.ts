import type { ApiKeyRecord, CreatedApiKey } from "../../control/api-keys.js";
import type { MemberWithUser, Organization } from "../../control/organizations.js";
import type { User } from "../../control/users.js";

/** Converts management records into Neon's JSON shapes (snake_case, ISO timestamps). */
const iso = (date: Date | null) => (date ? date.toISOString() : null);

export function presentCreatedKey({ record, token }: CreatedApiKey) {
  return {
    id: record.id,
    key: token,
    name: record.name,
    created_at: record.createdAt.toISOString(),
    created_by: record.createdBy.id,
    ...(record.projectId ? { project_id: record.projectId } : {}),
  };
}

export function presentKeyListItem(record: ApiKeyRecord) {
  return {
    id: record.id,
    name: record.name,
    created_at: record.createdAt.toISOString(),
    created_by: { id: record.createdBy.id, name: record.createdBy.name, image: "" },
    last_used_at: iso(record.lastUsedAt),
    last_used_from_addr: record.lastUsedFromAddr,
    ...(record.projectId ? { project_id: record.projectId } : {}),
  };
}

export function presentRevokedKey(record: ApiKeyRecord) {
  return {
    id: record.id,
    name: record.name,
    created_at: record.createdAt.toISOString(),
    created_by: record.createdBy.id,
    last_used_at: iso(record.lastUsedAt),
    last_used_from_addr: record.lastUsedFromAddr,
    revoked: record.revokedAt !== null,
    ...(record.projectId ? { project_id: record.projectId } : {}),
  };
}

export function presentOrganization(org: Organization) {
  return {
    id: org.id,
    name: org.name,
    handle: org.id,
    plan: "pgtoll",
    created_at: org.createdAt.toISOString(),
    managed_by: "console",
    updated_at: org.updatedAt.toISOString(),
  };
}

export function presentMember(member: MemberWithUser) {
  return {
    member: {
      id: member.id,
      user_id: member.userId,
      org_id: member.orgId,
      role: member.role,
      joined_at: member.joinedAt.toISOString(),
    },
    user: { email: member.email },
  };
}

export function presentUser(user: User) {
  return {
    id: user.id,
    email: user.email,
    login: user.email,
    name: user.name,
    last_name: "",
    image: "",
    plan: "pgtoll",
    active_seconds_limit: 0,
    projects_limit: 0,
    branches_limit: 0,
    max_autoscaling_limit: 0,
    auth_accounts: [{ email: user.email, image: "", login: user.email, name: user.name, provider: "pgtoll" }],
  };
}
