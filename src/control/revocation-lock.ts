import { unauthorized } from "./control-error.js";
import { principalOfKey } from "./key-principals.js";
import type { Principal } from "./principal.js";
import type { Queryable } from "./sql.js";

/** The two keys of the advisory lock that orders revocations and disclosures (any fixed int4 pair). */
const REVOCATION_LOCK = [741_163, 1];

/**
 * Call first in a transaction that checks a caller's access and may then show it a password (every change to a
 * project, a reveal): holds off revocations until the transaction ends, and refuses (401) a key revoked since
 * the request was authenticated. A revocation (`lockForRevocation`) then either finished before this check,
 * which sees it, or waits for this transaction and finds what it recorded.
 */
export async function holdAgainstRevocation(db: Queryable, principal: Principal): Promise<void> {
  await db.query("SELECT pg_advisory_xact_lock_shared($1, $2)", REVOCATION_LOCK);
  if (!(await principalOfKey(db, principal.keyId)))
    throw unauthorized("invalid API key: it was revoked, or its project left the organization");
}

/** Call first in a revocation's transaction: waits for the transactions that may show a password to end. */
export async function lockForRevocation(db: Queryable): Promise<void> {
  await db.query("SELECT pg_advisory_xact_lock($1, $2)", REVOCATION_LOCK);
}
