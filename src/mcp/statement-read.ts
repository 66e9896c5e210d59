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
  /** The statement had more rows than it was allowed to return: it stopped at the cap, or at the budget. */
  truncated: boolean;
  command: string;
  /** The session's budget (`pgtoll.max_session_cost`) ended the result: `rows` are those delivered before it. */
  budgetReached: boolean;
}

/** `SHOW name` on the session: the proxy answers `pgtoll.*` itself. */
export async function showSetting(client: pg.Client, name: string): Promise<string> {
  const { rows } = await client.query<Record<string, string>>(`SHOW ${name}`);
  return String(rows[0]?.[name]);
}

/**
 * Whether `error` is the proxy cutting a result off at the session's budget, its delivered rows charged. Its
 * message says which budget (the session's, not the agent's daily limit, both PT422) and whether rows came first
 * (a statement the budget stopped before it ran, or a write it rolled back, "was not run").
 */
function isBudgetCutOff(error: unknown): boolean {
  const { code, message = "" } = error as { code?: string; message?: string };
  return (
    code === SqlState.budgetExceeded &&
    message.startsWith("pgtoll.max_session_cost") &&
    message.includes("the result was cut off")
  );
}

/**
 * Runs one statement as a portal with a row limit, in one Execute, so rows past `maxRows` are never sent (nor
 * charged) and the proxy prices the statement once (its minimum, its rounding). Rows are kept as they arrive: with
 * `stopAtBudget`, a result the proxy cuts off at the session's budget (`pgtoll.max_session_cost`, SQLSTATE PT422)
 * resolves with the rows it delivered, and so charged, none lost with the batch it came in, and `budgetReached`;
 * any other error rejects.
 */
export function readCapped(
  client: pg.Client,
  sql: string,
  params: unknown[],
  maxRows: number,
  stopAtBudget = false,
): Promise<StatementResult> {
  const cursor = client.query(new Cursor(sql, params, { types: jsonSafeTypes }));
  const rows: Record<string, unknown>[] = [];
  let fields: pg.FieldDef[] = [];
  cursor.on("row", (row: Record<string, unknown>, result: pg.QueryResult) => {
    rows.push(row);
    fields = result.fields;
  });
  const fieldsOf = (list: pg.FieldDef[] | undefined) =>
    (list ?? []).map(({ name, dataTypeID }) => ({ name, dataTypeID }));
  return new Promise((resolve, reject) => {
    cursor.read(maxRows, (error, _batch, result) => {
      if (error) {
        if (!stopAtBudget || !isBudgetCutOff(error)) return reject(error);
        return resolve({
          fields: fieldsOf(fields),
          rows,
          rowCount: rows.length,
          truncated: true,
          // No CommandComplete came: the command is not known.
          command: "",
          budgetReached: true,
        });
      }
      // Suspended at the cap (the portal is still open): there may be more rows. Done: the statement ended.
      const truncated = (cursor as unknown as { state: string }).state === "idle";
      const finish = () =>
        resolve({
          fields: fieldsOf(result.fields),
          rows,
          rowCount: truncated ? rows.length : (result.rowCount ?? rows.length),
          truncated,
          command: result.command ?? "",
          budgetReached: false,
        });
      if (!truncated) return finish();
      cursor.close((closeError) => (closeError ? reject(closeError) : finish()));
    });
  });
}
