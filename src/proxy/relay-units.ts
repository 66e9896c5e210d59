import type { GuardedStatement } from "../guard/index.js";

/*
 * What the relay expects the upstream to answer next, in order: one unit per client message that has answers of
 * its own to wait for, and per message the proxy sent in the client's stream.
 */

/** A simple query in flight. */
export interface SimpleUnit {
  kind: "simple";
  statements: readonly GuardedStatement[];
  index: number;
  /** When it was sent upstream (performance.now()). */
  started: number;
  /** It holds a write: the client waits for it to be paid for (or undone) before anything else is sent. */
  writes: boolean;
  /** The proxy opened a transaction around it (see write-transactions.ts) and ends it at its ReadyForQuery. */
  wrapped: boolean;
  /** A write of it was not paid for, or wrote too many rows: its transaction must not commit. */
  failed: boolean;
  /** A wrapped query's last CommandComplete, relayed once its COMMIT succeeded (PostgreSQL commits first). */
  held?: Buffer;
}

/**
 * A statement the proxy sent itself: BEGIN before a wrapped write, COMMIT or ROLLBACK after it ("end", which
 * relays `held` or the COMMIT's `error`), or a stand-in that aborts the transaction of an unpaid write.
 */
export interface InjectedUnit {
  kind: "injected";
  role: "begin" | "end" | "abort";
  held?: Buffer;
  error?: Buffer;
}

export type Unit =
  | SimpleUnit
  /** An Execute, `started` when it was sent upstream. */
  | { kind: "execute"; sql: string; started: number; writes: boolean }
  /** A refused message's stand-in: its error is replaced by `error` (or swallowed when there is none). */
  | { kind: "refused"; error?: Buffer }
  /** A `SHOW pgtoll.<name>` sent upstream as its stand-in: its row and tag are replaced by the value. */
  | { kind: "setting"; name: string }
  | { kind: "sync" }
  | InjectedUnit;

/** The text of the statement `unit` is running, for its charge ("" when it runs none of the client's). */
export function sqlOf(unit: Unit | undefined): string {
  if (!unit) return "";
  if (unit.kind === "simple")
    return unit.statements[Math.min(unit.index, unit.statements.length - 1)]?.sql ?? "";
  if (unit.kind === "execute") return unit.sql;
  return "";
}

/** When the statement `unit` is running was sent upstream, when it is the client's. */
export function sentAtOf(unit: Unit | undefined): number | undefined {
  return unit?.kind === "simple" || unit?.kind === "execute" ? unit.started : undefined;
}

/** Whether a unit still upstream may write or commit: the upstream is then read to its end, not dropped. */
export function mayWrite(unit: Unit): boolean {
  if (unit.kind === "simple" || unit.kind === "execute") return unit.writes;
  return unit.kind === "injected";
}

/** After an error the upstream skips the rest of the batch up to Sync: so do the expectations. */
export function dropUntilSync(units: Unit[]): void {
  while (units.length > 0 && units[0]!.kind !== "sync" && units[0]!.kind !== "simple") units.shift();
}
