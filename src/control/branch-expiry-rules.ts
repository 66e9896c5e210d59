import { badRequest, conflict } from "./control-error.js";
import type { Queryable } from "./sql.js";

// Neon's rules for `expires_at` (docs: guides/branch-expiration): an RFC 3339 timestamp with a time zone,
// in the future and at most 30 days ahead, stored to the second; and a branch that expires is never
// protected, never the project's default branch and never a parent.

/** How far ahead `expires_at` may be. */
export const MAX_EXPIRY_MS = 30 * 24 * 60 * 60 * 1000;

/** RFC 3339 section 5.6 `date-time`: date, `T`, time, optional fraction, `Z` or a numeric offset. */
const RFC_3339 =
  /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.\d+)?(?:[Zz]|([+-])(\d{2}):(\d{2}))$/;

/** The instant of an RFC 3339 timestamp, or null when it is not one or names a day or time that does not exist. */
export function parseRfc3339(value: string): Date | null {
  const parts = RFC_3339.exec(value);
  if (!parts) return null;
  const [year = 0, month = 0, day = 0, hour = 0, minute = 0, second = 0] = parts.slice(1, 7).map(Number);
  const offsetHours = Number(parts[8] ?? 0);
  const offsetMinutes = Number(parts[9] ?? 0);
  const daysInMonth = new Date(Date.UTC(year, month, 0)).getUTCDate();
  if (month < 1 || month > 12 || day < 1 || day > daysInMonth) return null;
  if (hour > 23 || minute > 59 || second > 59 || offsetHours > 23 || offsetMinutes > 59) return null;
  const offsetMs = (offsetHours * 60 + offsetMinutes) * 60_000 * (parts[7] === "-" ? -1 : 1);
  return new Date(Date.UTC(year, month - 1, day, hour, minute, second) - offsetMs);
}

/**
 * `expires_at` as given to branch creation or update: undefined (no change), null (no expiry) or the instant,
 * truncated to the second. 400 unless it is RFC 3339, in the future and at most 30 days ahead.
 */
export function parseExpiresAt(value: string | null | undefined, now = Date.now()): Date | null | undefined {
  if (value === undefined || value === null) return value;
  const at = parseRfc3339(value);
  if (!at)
    throw badRequest(
      `expires_at must be an RFC 3339 timestamp with a time zone, such as 2025-07-15T18:02:16Z, got "${value}"`,
    );
  const seconds = new Date(Math.floor(at.getTime() / 1000) * 1000);
  if (seconds.getTime() <= now) throw badRequest(`expires_at must be in the future, got "${value}"`);
  if (seconds.getTime() - now > MAX_EXPIRY_MS)
    throw badRequest(`expires_at must be at most 30 days ahead, got "${value}"`);
  return seconds;
}

/** Whether the branch has child branches (it cannot expire, nor be deleted). */
export async function hasChildren(db: Queryable, branchId: string): Promise<boolean> {
  const { rowCount } = await db.query("SELECT 1 FROM branches WHERE parent_id = $1 LIMIT 1", [branchId]);
  return Boolean(rowCount);
}

/**
 * Refuses (409) a branch state Neon does not allow: an expiring branch that is protected, the default branch
 * or a parent. `branch` is the state the change would leave.
 */
export async function checkExpiringBranch(
  db: Queryable,
  branch: { id: string; isDefault: boolean; protected: boolean; expiresAt: Date | null },
): Promise<void> {
  if (!branch.expiresAt) return;
  if (branch.isDefault)
    throw conflict(`branch ${branch.id} is the project's default branch: the default branch cannot expire`);
  if (branch.protected) throw conflict(`branch ${branch.id} is protected: a protected branch cannot expire`);
  if (await hasChildren(db, branch.id))
    throw conflict(`branch ${branch.id} has child branches: a parent branch cannot expire`);
}

/** Refuses (409) to make a branch that expires a parent or the default branch. */
export function checkDoesNotExpire(
  branch: { id: string; expiresAt: Date | null },
  toBecome: "a parent" | "the default branch",
): void {
  if (branch.expiresAt)
    throw conflict(
      `branch ${branch.id} expires at ${branch.expiresAt.toISOString()}: it cannot become ${toBecome} (set its expires_at to null first)`,
    );
}
