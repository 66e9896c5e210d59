/**
 * Who a request acts as, from its API key (spec "Key kinds"):
 * - personal: a user; reaches the user's own projects and those of every organization the user belongs to;
 * - organization: admin-level access to every project of one organization;
 * - project: member-level access to one project of one organization.
 * `accountId` is what the rate limits count against: the user, or the organization.
 */
export type Principal =
  | { kind: "personal"; keyId: number; userId: string; accountId: string }
  | { kind: "organization"; keyId: number; orgId: string; createdBy: string; accountId: string }
  | {
      kind: "project";
      keyId: number;
      orgId: string;
      projectId: string;
      createdBy: string;
      accountId: string;
    };

export type PersonalPrincipal = Extract<Principal, { kind: "personal" }>;
