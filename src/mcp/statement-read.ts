import type pg from "pg";
import Cursor from "pg-cursor";
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
