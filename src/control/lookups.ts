import { notFound } from "./control-error.js";
import {
  type BranchRow,
  type DatabaseRow,
  type EndpointRow,
  type RoleRow,
  toBranch,
  toDatabase,
  toEndpoint,
  toRole,
} from "./rows.js";
import type { Queryable } from "./sql.js";

/** Reads of the metadata that several control functions share. Each throws 404 for what does not exist. */

export async function getBranch(
  db: Queryable,
  projectId: string,
  branchId: string,
  forUpdate = false,
): Promise<BranchRow> {
  const { rows } = await db.query(
    `SELECT * FROM branches WHERE project_id = $1 AND id = $2${forUpdate ? " FOR UPDATE" : ""}`,
    [projectId, branchId],
  );
  if (!rows[0]) throw notFound(`branch ${branchId} not found`);
  return toBranch(rows[0]);
}

export async function defaultBranch(db: Queryable, projectId: string): Promise<BranchRow> {
  const { rows } = await db.query("SELECT * FROM branches WHERE project_id = $1 AND is_default", [projectId]);
  if (!rows[0]) throw notFound(`project ${projectId} has no default branch`);
  return toBranch(rows[0]);
}

export async function branchesOf(db: Queryable, projectId: string): Promise<BranchRow[]> {
  const { rows } = await db.query("SELECT * FROM branches WHERE project_id = $1 ORDER BY created_at, id", [
    projectId,
  ]);
  return rows.map(toBranch);
}

export async function databasesOf(db: Queryable, branchId: string): Promise<DatabaseRow[]> {
  const { rows } = await db.query("SELECT * FROM branch_databases WHERE branch_id = $1 ORDER BY id", [
    branchId,
  ]);
  return rows.map(toDatabase);
}

export async function getDatabase(db: Queryable, branchId: string, name: string): Promise<DatabaseRow> {
  const { rows } = await db.query("SELECT * FROM branch_databases WHERE branch_id = $1 AND name = $2", [
    branchId,
    name,
  ]);
  if (!rows[0]) throw notFound(`database ${name} not found on branch ${branchId}`);
  return toDatabase(rows[0]);
}

const ROLES = `SELECT br.branch_id, br.project_id, br.name, br.protected, br.created_at, br.updated_at,
  pr.no_login, pr.physical_name, pr.password_sealed
  FROM branch_roles br JOIN project_roles pr ON pr.project_id = br.project_id AND pr.name = br.name`;

export async function rolesOf(db: Queryable, branchId: string): Promise<RoleRow[]> {
  const { rows } = await db.query(`${ROLES} WHERE br.branch_id = $1 ORDER BY br.created_at, br.name`, [
    branchId,
  ]);
  return rows.map(toRole);
}

export async function getRole(db: Queryable, branchId: string, name: string): Promise<RoleRow> {
  const { rows } = await db.query(`${ROLES} WHERE br.branch_id = $1 AND br.name = $2`, [branchId, name]);
  if (!rows[0]) throw notFound(`role ${name} not found on branch ${branchId}`);
  return toRole(rows[0]);
}

export async function endpointsOfProject(db: Queryable, projectId: string): Promise<EndpointRow[]> {
  const { rows } = await db.query("SELECT * FROM endpoints WHERE project_id = $1 ORDER BY created_at, id", [
    projectId,
  ]);
  return rows.map(toEndpoint);
}

export async function endpointsOfBranch(db: Queryable, branchId: string): Promise<EndpointRow[]> {
  const { rows } = await db.query("SELECT * FROM endpoints WHERE branch_id = $1 ORDER BY created_at, id", [
    branchId,
  ]);
  return rows.map(toEndpoint);
}

export async function getEndpoint(
  db: Queryable,
  projectId: string,
  endpointId: string,
  forUpdate = false,
): Promise<EndpointRow> {
  const { rows } = await db.query(
    `SELECT * FROM endpoints WHERE project_id = $1 AND id = $2${forUpdate ? " FOR UPDATE" : ""}`,
    [projectId, endpointId],
  );
  if (!rows[0]) throw notFound(`endpoint ${endpointId} not found`);
  return toEndpoint(rows[0]);
}
