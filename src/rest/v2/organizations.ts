import { Type } from "@sinclair/typebox";
import type { FastifyInstance } from "fastify";
import { forbidden } from "../../control/control-error.js";
import { organizationFor } from "../../control/organization-access.js";
import {
  addMember,
  getMember,
  listMembers,
  removeMember,
  setMemberRole,
} from "../../control/organizations.js";
import { inTransaction } from "../../control/sql.js";
import { transferProjects } from "../../control/transfer.js";
import { createUser, findUserByEmail } from "../../control/users.js";
import { principalOf } from "./authentication.js";
import { presentMember, presentOrganization } from "./present-accounts.js";
import { personalPrincipal, type RouteOptions, tags, typed } from "./route-helpers.js";
import {
  Invitation,
  InvitationsBody,
  MemberParams,
  MemberRole,
  MemberWithUser,
  Organization,
  OrgParams,
  TransferBody,
} from "./schemas/accounts.js";
import { errorResponses } from "./schemas/common.js";

const MemberUpdateBody = Type.Object({ role: MemberRole });
const TransferParams = Type.Object({ source_org_id: OrgParams.properties.org_id });

/** Organizations, their members, invitations, and moving projects between organizations. */
export async function organizationRoutes(app: FastifyInstance, { plane }: RouteOptions) {
  const db = plane.db;

  app.get(
    "/organizations/:org_id",
    {
      schema: {
        tags: tags.orgs,
        summary: "Get an organization",
        params: OrgParams,
        response: { 200: Organization, ...errorResponses },
      },
    },
    async (request) => {
      const { org_id } = typed(OrgParams, request.params);
      return presentOrganization((await organizationFor(db, principalOf(request), org_id)).organization);
    },
  );

  app.get(
    "/organizations/:org_id/members",
    {
      schema: {
        tags: tags.orgs,
        summary: "List an organization's members",
        params: OrgParams,
        response: { 200: Type.Object({ members: Type.Array(MemberWithUser) }), ...errorResponses },
      },
    },
    async (request) => {
      const { org_id } = typed(OrgParams, request.params);
      await organizationFor(db, principalOf(request), org_id);
      return { members: (await listMembers(db, org_id)).map(presentMember) };
    },
  );

  app.get(
    "/organizations/:org_id/members/:member_id",
    {
      schema: {
        tags: tags.orgs,
        summary: "Get a member",
        params: MemberParams,
        response: { 200: MemberWithUser.properties.member, ...errorResponses },
      },
    },
    async (request) => {
      const { org_id, member_id } = typed(MemberParams, request.params);
      await organizationFor(db, principalOf(request), org_id);
      return presentMember(await getMember(db, org_id, member_id)).member;
    },
  );

  app.patch(
    "/organizations/:org_id/members/:member_id",
    {
      schema: {
        tags: tags.orgs,
        summary: "Change a member's role (administrators)",
        params: MemberParams,
        body: MemberUpdateBody,
        response: { 200: MemberWithUser.properties.member, ...errorResponses },
      },
    },
    async (request) => {
      const caller = personalPrincipal(request, "change member roles");
      const { org_id, member_id } = typed(MemberParams, request.params);
      const { role } = typed(MemberUpdateBody, request.body);
      const access = await organizationFor(db, caller, org_id);
      if (access.role !== "admin")
        throw forbidden(`only administrators of organization ${org_id} may change roles`);
      const member = await inTransaction(db, (client) => setMemberRole(client, org_id, member_id, role));
      return presentMember(member).member;
    },
  );

  app.delete(
    "/organizations/:org_id/members/:member_id",
    {
      schema: {
        tags: tags.orgs,
        summary: "Remove a member (administrators), or leave the organization (the member)",
        params: MemberParams,
        response: { 200: Type.Object({}), ...errorResponses },
      },
    },
    async (request) => {
      const caller = personalPrincipal(request, "remove members");
      const { org_id, member_id } = typed(MemberParams, request.params);
      const access = await organizationFor(db, caller, org_id);
      const member = await getMember(db, org_id, member_id);
      if (access.role !== "admin" && member.userId !== caller.userId) {
        throw forbidden(`only administrators of organization ${org_id} may remove other members`);
      }
      await removeMember(plane, org_id, member_id);
      return {};
    },
  );

  app.post(
    "/organizations/:org_id/invitations",
    {
      schema: {
        tags: tags.orgs,
        summary:
          "Add members by email (administrators); with no mail to accept, an invitation takes effect at once",
        params: OrgParams,
        body: InvitationsBody,
        response: { 200: Type.Object({ invitations: Type.Array(Invitation) }), ...errorResponses },
      },
    },
    async (request) => {
      const caller = personalPrincipal(request, "invite members");
      const { org_id } = typed(OrgParams, request.params);
      const { invitations } = typed(InvitationsBody, request.body);
      const access = await organizationFor(db, caller, org_id);
      if (access.role !== "admin")
        throw forbidden(`only administrators of organization ${org_id} may invite members`);
      const added = await inTransaction(db, async (client) => {
        const out = [];
        for (const invitation of invitations) {
          const user =
            (await findUserByEmail(client, invitation.email)) ?? (await createUser(client, invitation.email));
          const member = await addMember(client, org_id, user.id, invitation.role);
          out.push({
            id: member.id,
            email: user.email,
            org_id,
            invited_by: caller.userId,
            invited_at: member.joinedAt.toISOString(),
            role: member.role,
          });
        }
        return out;
      });
      return { invitations: added };
    },
  );

  app.get(
    "/organizations/:org_id/invitations",
    {
      schema: {
        tags: tags.orgs,
        summary: "Pending invitations (always none: invitations take effect at once)",
        params: OrgParams,
        response: { 200: Type.Object({ invitations: Type.Array(Invitation) }), ...errorResponses },
      },
    },
    async (request) => {
      const { org_id } = typed(OrgParams, request.params);
      await organizationFor(db, principalOf(request), org_id);
      return { invitations: [] };
    },
  );

  app.post(
    "/organizations/:source_org_id/projects/transfer",
    {
      schema: {
        tags: tags.orgs,
        summary: "Move projects to another organization (administrator of both)",
        params: TransferParams,
        body: TransferBody,
        response: { 200: Type.Object({}), ...errorResponses },
      },
    },
    async (request) => {
      const { source_org_id } = typed(TransferParams, request.params);
      const body = typed(TransferBody, request.body);
      await transferProjects(
        plane,
        principalOf(request),
        source_org_id,
        body.destination_org_id,
        body.project_ids,
      );
      return {};
    },
  );
}
