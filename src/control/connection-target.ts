import { projectFor } from "./access.js";
import { notFound, preconditionFailed } from "./control-error.js";
import { defaultBranch, endpointsOfBranch, getBranch, getDatabase, getEndpoint, getRole } from "./lookups.js";
import { disclosePassword } from "./password-disclosures.js";
import type { Plane } from "./plane.js";
import type { Principal } from "./principal.js";

export interface ConnectionTargetQuery {
  branch_id?: string;
  endpoint_id?: string;
  database_name: string;
  role_name: string;
}

/**
 * What `GET /projects/{id}/connection_uri` connects to: the branch (default: the default branch), the endpoint
 * (default: the branch's read_write one, else its first), a role of the branch with its password, and one of
 * the branch's databases. The password is recorded as shown to the caller (password-disclosures.ts).
 */
export async function connectionTarget(
  plane: Plane,
  principal: Principal,
  projectId: string,
  query: ConnectionTargetQuery,
) {
  const { project } = await projectFor(plane.db, principal, projectId);
  const branch = query.branch_id
    ? await getBranch(plane.db, projectId, query.branch_id)
    : await defaultBranch(plane.db, projectId);
  let endpoint = query.endpoint_id ? await getEndpoint(plane.db, projectId, query.endpoint_id) : undefined;
  if (endpoint && endpoint.branchId !== branch.id)
    throw notFound(`endpoint ${endpoint.id} not found on branch ${branch.id}`);
  if (!endpoint) {
    const endpoints = await endpointsOfBranch(plane.db, branch.id);
    endpoint = endpoints.find((e) => e.type === "read_write") ?? endpoints[0];
    if (!endpoint) throw notFound(`branch ${branch.id} has no endpoint`);
  }
  const role = await getRole(plane.db, branch.id, query.role_name);
  if (role.noLogin || !role.passwordSealed) throw preconditionFailed(`role ${role.name} cannot log in`);
  const database = await getDatabase(plane.db, branch.id, query.database_name);
  return {
    project,
    branch,
    endpoint,
    role: role.name,
    password: await disclosePassword(plane, principal, projectId, role.name),
    database: database.name,
  };
}
