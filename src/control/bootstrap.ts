import type pg from "pg";
import { createPersonalKey } from "./api-keys.js";
import { conflict } from "./control-error.js";
import { createOrganization, type Organization } from "./organizations.js";
import { inTransaction } from "./sql.js";
import { createUser, findUserByEmail, normalizeEmail, type User } from "./users.js";

export interface BootstrapResult {
  user: User;
  organization: Organization | null;
  /** The user's first personal API key; shown once. */
  apiKey: string;
}

/**
 * What `pgtoll admin bootstrap` does, with no console to sign in to: creates the user (or takes one that was
 * invited into an organization but has no key yet), optionally a new organization the user administers, and
 * the user's first personal API key. Refuses a user who already has keys: further keys come from the API.
 */
export async function bootstrapAccount(
  db: pg.Pool,
  email: string,
  orgName?: string,
): Promise<BootstrapResult> {
  const normalized = normalizeEmail(email);
  return inTransaction(db, async (client) => {
    await client.query("SELECT pg_advisory_xact_lock(hashtext(lower($1)))", [normalized]);
    let user = await findUserByEmail(client, normalized);
    if (user) {
      const { rowCount } = await client.query(
        "SELECT 1 FROM api_keys WHERE created_by = $1 OR user_id = $1 LIMIT 1",
        [user.id],
      );
      if (rowCount)
        throw conflict(
          `user ${normalized} already has API keys: create further keys with POST /api/v2/api_keys`,
        );
    } else {
      user = await createUser(client, normalized);
    }
    const organization = orgName === undefined ? null : await createOrganization(client, orgName, user.id);
    const { token } = await createPersonalKey(client, user.id, "bootstrap");
    return { user, organization, apiKey: token };
  });
}
