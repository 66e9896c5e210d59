import type pg from "pg";
import Cursor from "pg-cursor";
import { SqlState } from "../db/sql-state.js";
import { jsonSafeTypes } from "../providers/json-safe-types.js";

/** What one statement returned through the session. */
export interface StatementResult {
  fields: { name: string; dataTypeID: number }[];
  rows: Record<string, unknown>[];
  /** Rows returned, or for a write the rows it changed (PostgreSQL's command tag). */
  rowCount: number;
  /** The statement had more rows than it was allowed to return: it stopped at the cap. */
  truncated: boolean;
  command: string;
}

/** `SHOW name` on the session: the proxy answers `pgtoll.*` itself. */
export async function showSetting(client: pg.Client, name: string): Promise<string> {
  const { rows } = await client.query<Record<string, string>>(`SHOW ${name}`);
  return String(rows[0]?.[name]);
}

/**
 * Runs one statement as a portal with a row limit, so rows past `maxRows` are never sent (nor charged).
 */
export function readCapped(
  client: pg.Client,
  sql: string,
  params: unknown[],
  maxRows: number,
): Promise<StatementResult> {
  const cursor = client.query(new Cursor(sql, params, { types: jsonSafeTypes }));
  return new Promise((resolve, reject) => {
    cursor.read(maxRows, (error, rows, result) => {
      if (error) return reject(error);
      // Suspended at the cap (the portal is still open): there may be more rows. Done: the statement ended.
      const truncated = (cursor as unknown as { state: string }).state === "idle";
      const finish = () =>
        resolve({
          fields: (result.fields ?? []).map(({ name, dataTypeID }) => ({ name, dataTypeID })),
          rows: rows as Record<string, unknown>[],
          rowCount: truncated ? rows.length : (result.rowCount ?? rows.length),
          truncated,
          command: result.command ?? "",
        });
      if (!truncated) return finish();
      cursor.close((closeError) => (closeError ? reject(closeError) : finish()));
    });
  });
}

/**
 * As {@link readCapped}, reading one row at a time, for a statement the proxy may end at the agent's budget
 * (`pgtoll.max_session_cost`, SQLSTATE PT422): every row the proxy delivered, and so charged, is kept and
 * returned with `budgetReached`, none is lost with the batch it came in.
 */
export function readWithinBudget(
  client: pg.Client,
  sql: string,
  params: unknown[],
  maxRows: number,
): Promise<StatementResult & { budgetReached: boolean }> {
  const cursor = client.query(new Cursor(sql, params, { types: jsonSafeTypes }));
  const rows: Record<string, unknown>[] = [];
  return new Promise((resolve, reject) => {
    const finish = (result: Partial<pg.QueryResult>, truncated: boolean, budgetReached: boolean) =>
      resolve({
        fields: (result.fields ?? []).map(({ name, dataTypeID }) => ({ name, dataTypeID })),
        rows,
        rowCount: truncated || budgetReached ? rows.length : (result.rowCount ?? rows.length),
        truncated: truncated || budgetReached,
        command: result.command ?? "",
        budgetReached,
      });
    const next = () =>
      cursor.read(1, (error, batch, result) => {
        if (error) {
          if ((error as { code?: string }).code === SqlState.budgetExceeded) return finish({}, false, true);
          return reject(error);
        }
        rows.push(...(batch as Record<string, unknown>[]));
        const done = (cursor as unknown as { state: string }).state === "done";
        if (done) return finish(result, false, false);
        if (rows.length < maxRows) return next();
        cursor.close((closeError) => (closeError ? reject(closeError) : finish(result, true, false)));
      });
    next();
  });
}
