import { badRequest } from "./control-error.js";

const bytes = (value: string) => Buffer.byteLength(value, "utf8");

/**
 * PostgreSQL identifiers are at most 63 bytes. A role name keeps to 63 less its project's role prefix and an
 * underscore, the room real names once took (`<prefix>_<name>`), so that a name valid before is valid now.
 */
const MAX_IDENTIFIER_BYTES = 63;

/** The real name project roles had before they got random ones (tenant-isolation.ts renames such roles). */
export function legacyPhysicalRoleName(rolePrefix: string, name: string): string {
  return `${rolePrefix}_${name}`;
}

export function checkRoleName(name: string, rolePrefix: string): string {
  const limit = MAX_IDENTIFIER_BYTES - rolePrefix.length - 1;
  if (!name || bytes(name) > limit)
    throw badRequest(`a role name must have 1 to ${limit} bytes, got "${name}"`);
  if (name.includes("\0")) throw badRequest("a role name cannot contain NUL");
  if (name.startsWith("pg_")) throw badRequest(`role names starting with "pg_" are reserved, got "${name}"`);
  return name;
}

export function checkDatabaseName(name: string): string {
  if (!name || bytes(name) > MAX_IDENTIFIER_BYTES)
    throw badRequest(`a database name must have 1 to 63 bytes, got "${name}"`);
  if (name.includes("\0")) throw badRequest("a database name cannot contain NUL");
  return name;
}

export function checkBranchName(name: string): string {
  if (!name.trim() || name.length > 256) throw badRequest("a branch name must have 1 to 256 characters");
  return name;
}

export function checkProjectName(name: string): string {
  if (!name.trim() || name.length > 256) throw badRequest("a project name must have 1 to 256 characters");
  return name;
}
