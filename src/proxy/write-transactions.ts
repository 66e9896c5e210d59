import { SqlState } from "../db/sql-state.js";
import type { GuardedStatement } from "../guard/index.js";
import type { TransactionStatus } from "./backend-messages.js";
import { errorFrame } from "./proxy-errors.js";
import { encodeFlush, encodeQuery } from "./serializer.js";

/**
 * How a simple query that writes runs, so that its writes commit only once they are paid for:
 * - "wrap": outside a transaction, with no transaction control of its own. PostgreSQL would commit it at the
 *   end of the query, before the proxy reads its count; the proxy opens a transaction first (`BEGIN`) and ends
 *   it with `COMMIT` once the writes are paid, or `ROLLBACK`.
 * - "in-transaction": its writes are left uncommitted when it ends (inside a transaction block, or one it opens).
 *   A write that cannot be paid for makes the proxy abort the block, as a failed statement would.
 * - a refusal: a write followed in the same query by the COMMIT that ends its transaction (or by the query's
 *   own end outside a block, when it also controls transactions): the proxy could not stop the commit.
 */
export type WritePlan = "wrap" | "in-transaction" | { refusal: Buffer };

/** Plans a simple query holding at least one write, for a session whose status is `status`. */
export function planWrites(statements: readonly GuardedStatement[], status: TransactionStatus): WritePlan {
  let inBlock = status !== "I";
  let controlsTransactions = false;
  let uncommittedWrite = false;
  for (const statement of statements) {
    if (statement.writes) {
      uncommittedWrite = true;
      continue;
    }
    if (!statement.transactionControl) continue;
    controlsTransactions = true;
    switch (statement.command) {
      case "BEGIN":
      case "START TRANSACTION":
        inBlock = true;
        break;
      case "COMMIT":
        if (uncommittedWrite) return { refusal: COMMIT_AFTER_WRITE };
        inBlock = false;
        break;
      case "ROLLBACK":
        // ROLLBACK TO a savepoint keeps the block and may keep earlier writes.
        if (!/^rollback\s+(?:work\s+|transaction\s+)?to\b/i.test(statement.sql)) {
          inBlock = false;
          uncommittedWrite = false;
        }
        break;
    }
  }
  if (inBlock || !uncommittedWrite) return "in-transaction";
  return controlsTransactions ? { refusal: COMMIT_AFTER_WRITE } : "wrap";
}

const COMMIT_AFTER_WRITE = errorFrame(
  SqlState.featureNotSupported,
  "pgtoll commits a write only once it is paid for: send the COMMIT that ends a write's transaction as a query of its own",
  {
    hint: "for example BEGIN; UPDATE ...; then COMMIT in the next query, or the UPDATE alone (pgtoll commits it)",
  },
);

/** The statements the proxy sends around a wrapped write, and to abort a transaction block (any parse error). */
export const BEGIN_QUERY = encodeQuery("BEGIN");
export const COMMIT_QUERY = encodeQuery("COMMIT");
export const ROLLBACK_QUERY = encodeQuery("ROLLBACK");

/**
 * Sent after a write's Execute: the server holds its answers until Sync or Flush, and the proxy holds the client's
 * Sync (which would commit) until the write's count is in.
 */
export const FLUSH = encodeFlush();
