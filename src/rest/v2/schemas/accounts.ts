import { Type } from "@sinclair/typebox";
import { Id, Nullable, Timestamp } from "./common.js";

export const KeyName = Type.String({
  minLength: 1,
  maxLength: 64,
  description: "a descriptive name for the key",
});

export const ApiKeyCreateBody = Type.Object({ key_name: KeyName });
export const OrgApiKeyCreateBody = Type.Object({
  key_name: KeyName,
  project_id: Type.Optional(Id),
});

export const ApiKeyCreated = Type.Object({
  id: Type.Integer(),
  key: Type.String({ description: "the secret token; shown only in this answer" }),
  name: Type.String(),
  created_at: Timestamp,
  created_by: Type.String({ format: "uuid", description: "the user who created the key" }),
  project_id: Type.Optional(Type.String({ description: "only for a project-scoped key" })),
});

export const ApiKeyCreator = Type.Object({ id: Type.String(), name: Type.String(), image: Type.String() });

export const ApiKeyListItem = Type.Object({
  id: Type.Integer(),
  name: Type.String(),
  created_at: Timestamp,
  created_by: ApiKeyCreator,
  last_used_at: Nullable(Timestamp),
  last_used_from_addr: Type.String(),
  project_id: Type.Optional(Type.String()),
});

export const ApiKeyRevoked = Type.Object({
  id: Type.Integer(),
  name: Type.String(),
  created_at: Timestamp,
  created_by: Type.String(),
  last_used_at: Nullable(Timestamp),
  last_used_from_addr: Type.String(),
  revoked: Type.Boolean(),
  project_id: Type.Optional(Type.String()),
});

export const KeyParams = Type.Object({ key_id: Type.Integer({ minimum: 1 }) });
export const OrgParams = Type.Object({ org_id: Id });
export const OrgKeyParams = Type.Object({ org_id: Id, key_id: Type.Integer({ minimum: 1 }) });
export const MemberParams = Type.Object({ org_id: Id, member_id: Type.String({ maxLength: 64 }) });

export const Organization = Type.Object({
  id: Type.String(),
  name: Type.String(),
  handle: Type.String(),
  plan: Type.String(),
  created_at: Timestamp,
  managed_by: Type.String(),
  updated_at: Timestamp,
});

export const MemberRole = Type.Union([Type.Literal("admin"), Type.Literal("member")]);

export const Member = Type.Object({
  id: Type.String(),
  user_id: Type.String(),
  org_id: Type.String(),
  role: Type.String(),
  joined_at: Timestamp,
});

export const MemberWithUser = Type.Object({ member: Member, user: Type.Object({ email: Type.String() }) });

export const InvitationsBody = Type.Object({
  invitations: Type.Array(
    Type.Object({ email: Type.String({ minLength: 3, maxLength: 256 }), role: MemberRole }),
    {
      minItems: 1,
      maxItems: 100,
    },
  ),
});

export const Invitation = Type.Object({
  id: Type.String(),
  email: Type.String(),
  org_id: Type.String(),
  invited_by: Type.String(),
  invited_at: Timestamp,
  role: Type.String(),
});

export const CurrentUser = Type.Object({
  id: Type.String(),
  email: Type.String(),
  login: Type.String(),
  name: Type.String(),
  last_name: Type.String(),
  image: Type.String(),
  plan: Type.String(),
  active_seconds_limit: Type.Integer(),
  projects_limit: Type.Integer(),
  branches_limit: Type.Integer(),
  max_autoscaling_limit: Type.Number(),
  auth_accounts: Type.Array(
    Type.Object({
      email: Type.String(),
      image: Type.String(),
      login: Type.String(),
      name: Type.String(),
      provider: Type.String(),
    }),
  ),
});

export const TransferBody = Type.Object({
  destination_org_id: Id,
  project_ids: Type.Array(Id, { minItems: 1, maxItems: 400 }),
});
