import type pg from "pg";
import { SqlState } from "../db/sql-state.js";

/** Anything that runs a query: a pool, or one client of it. */
export type Queryable = Pick<pg.Pool, "query">;

/**
 * One ledger statement, run as a named prepared statement: each connection parses and plans it once, then
 * reuses the plan. The ledger's statements are long CTEs whose planning costs several times their execution
 * (about 0.5 ms of PostgreSQL CPU for a charge batch), and the wire proxy runs them hundreds of times a second.
 * Note: a pooler between pgtoll and its metadata database must keep protocol-level prepared statements
 * (session pooling, or PgBouncer >= 1.21 with `max_prepared_statements`).
 */
export interface LedgerStatement {
  /** Unique per text: node-postgres refuses one name with two texts on a connection. */
  readonly name: string;
  readonly text: string;
}

export function ledgerStatement(name: string, text: string): LedgerStatement {
  return { name: `pgtoll_ledger_${name}`, text };
}

/** SQLSTATEs after which a single-statement transaction can simply run again: it changed nothing. */
const RETRYABLE = new Set<string>([SqlState.deadlockDetected, SqlState.serializationFailure]);

/**
 * Runs one ledger statement, again if PostgreSQL chose it as a deadlock victim. Every statement locks a
 * reservation before its balance row, but two batches (from two pgtoll processes) that charge the same agents
 * lock their balance rows in whatever order their plans visit them; each statement is its own transaction, so
 * a retry is exact.
 */
export async function runStatement<R extends pg.QueryResultRow>(
  db: Queryable,
  statement: LedgerStatement,
  values?: unknown[],
): Promise<pg.QueryResult<R>> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await db.query<R>({ name: statement.name, text: statement.text, values });
    } catch (error) {
      if (attempt >= 8 || !RETRYABLE.has((error as { code?: string }).code ?? "")) throw error;
      await new Promise((resolve) => setTimeout(resolve, Math.random() * 2 ** attempt));
    }
  }
}
