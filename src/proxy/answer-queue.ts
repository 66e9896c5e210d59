import type { GuardedStatement } from "../guard/index.js";
import type { TransactionStatus } from "./backend-messages.js";
import type { KeptRows } from "./kept-rows.js";

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
  /** For an `end`: the statements of the write it commits, whose rules apply to the COMMIT's error text. */
  statements?: readonly GuardedStatement[];
}

/** What the upstream owes an answer for: a client message that has answers of its own, or the proxy's. */
export type Unit =
  | SimpleUnit
  /**
   * An Execute, `started` when it was sent upstream; `continued` when it reads on from a portal an earlier
   * Execute left suspended (one statement read in several batches). `kept`: a write the client executed with a
   * row limit, sent with none; its rows past the limit are kept (kept-rows.ts).
   */
  | {
      kind: "execute";
      sql: string;
      started: number;
      writes: boolean;
      portal: string;
      continued: boolean;
      kept?: KeptRows;
    }
  /** An Execute of a portal whose rows the proxy keeps: the upstream's empty answer is replaced by `maxRows` of them. */
  | { kind: "kept"; portal: string; maxRows: number; rows: KeptRows }
  /** A refused message's stand-in: its error is replaced by `error` (or swallowed when there is none). */
  | { kind: "refused"; error?: Buffer }
  /** A `SHOW pgtoll.<name>` sent upstream as its stand-in: its row and tag are replaced by the value. */
  | { kind: "setting"; name: string }
  | { kind: "sync" }
  | InjectedUnit;

/**
 * What the upstream owes, in order: a unit per message sent that has answers of its own, taken off as they are
 * answered. The client's side pushes and waits (a write query for the queue to drain, the frames after a write
 * for it to be answered); the upstream's side takes units off, and `releaseWaiters` lets the waits go on.
 */
export class AnswerQueue {
  readonly #units: Unit[] = [];
  /** The write the client's frames wait for: resolved once `unit` has left the queue (paid, or undone). */
  #pendingWrite: { unit: Unit; resolve: () => void } | undefined;
  /** A write query waits for everything before it to be answered, to know whether a transaction is open. */
  #onDrained: (() => void) | undefined;

  /**
   * Portals an Execute left suspended (PortalSuspended): the next Execute of one goes on with the same
   * statement. A portal leaves it when it completes, is bound again or closed, or its transaction ends.
   */
  readonly suspendedPortals = new Set<string>();

  /**
   * Portals of writes executed with a row limit whose rows past it the proxy keeps (kept-rows.ts). A portal leaves
   * it when its rows are all taken, it is bound again or closed, or its transaction ends.
   */
  readonly keptPortals = new Map<string, KeptRows>();

  /** Bytes of rows the session's portals keep, `extra` among them. */
  keptBytes(extra: KeptRows): number {
    let bytes = extra.bytes;
    for (const rows of this.keptPortals.values()) if (rows !== extra) bytes += rows.bytes;
    return bytes;
  }

  /** The portal `name` is gone (bound again, closed): what was kept of or suspended in it is forgotten. */
  forgetPortal(name: string): void {
    this.suspendedPortals.delete(name);
    this.keptPortals.delete(name);
  }

  /** `status`: the session's transaction status, as the last ReadyForQuery gave it. */
  constructor(public status: TransactionStatus) {}

  /** The unit the upstream is answering. */
  get head(): Unit | undefined {
    return this.#units[0];
  }

  get empty(): boolean {
    return this.#units.length === 0;
  }

  /** Something still upstream may write or commit: the upstream must be read to its end, not dropped. */
  get mayWrite(): boolean {
    return this.#units.some(mayWrite);
  }

  /** Whether what was sent may still commit writes: a Sync, or the proxy's COMMIT of a wrapped query. */
  get mayCommit(): boolean {
    return this.#units.some(
      (unit) => unit.kind === "sync" || (unit.kind === "injected" && unit.role === "end"),
    );
  }

  push(unit: Unit): void {
    this.#units.push(unit);
  }

  shift(): void {
    this.#units.shift();
  }

  /** After an error the upstream skips the rest of the batch up to Sync: so do the expectations. */
  dropUntilSync(): void {
    const units = this.#units;
    while (units.length > 0 && units[0]!.kind !== "sync" && units[0]!.kind !== "simple") units.shift();
  }

  /** A ReadyForQuery closes the oldest simple query or Sync-terminated batch: the simple query, if it was one. */
  closeAtReady(): SimpleUnit | undefined {
    while (this.#units.length > 0) {
      const unit = this.#units.shift()!;
      if (unit.kind === "simple") return unit;
      if (unit.kind === "sync") return undefined;
    }
    return undefined;
  }

  /** Resolves once nothing is owed. */
  drained(): Promise<void> {
    return new Promise<void>((resolve) => (this.#onDrained = resolve));
  }

  /** Resolves once the unit queued last (a write) has been answered: the client's next frames wait for it. */
  answeredLast(): Promise<void> {
    const unit = this.#units[this.#units.length - 1]!;
    return new Promise<void>((resolve) => (this.#pendingWrite = { unit, resolve }));
  }

  /** Queues a statement of the proxy's own; the write the client waits for now waits for it too. */
  pushInjected(unit: InjectedUnit): void {
    this.#units.push(unit);
    if (this.#pendingWrite) this.#pendingWrite.unit = unit;
  }

  /** Lets the client's frames go on once what they wait for has been answered. */
  releaseWaiters(): void {
    const pending = this.#pendingWrite;
    if (pending && !this.#units.includes(pending.unit)) {
      this.#pendingWrite = undefined;
      pending.resolve();
    }
    if (this.#onDrained && this.#units.length === 0) {
      const drained = this.#onDrained;
      this.#onDrained = undefined;
      drained();
    }
  }

  /** The session ended: whatever waits is let go (and sees the session ended). */
  end(): void {
    this.#pendingWrite?.resolve();
    this.#pendingWrite = undefined;
    this.#onDrained?.();
    this.#onDrained = undefined;
  }
}

/** The statement of a simple query `unit` is running (its last once all have run). */
export function simpleStatementOf(unit: Unit | undefined): GuardedStatement | undefined {
  return unit?.kind === "simple"
    ? unit.statements[Math.min(unit.index, unit.statements.length - 1)]
    : undefined;
}

/** The text of the statement `unit` is running, for its charge ("" when it runs none of the client's). */
export function sqlOf(unit: Unit | undefined): string {
  if (unit?.kind === "execute") return unit.sql;
  return simpleStatementOf(unit)?.sql ?? "";
}

/** When the statement `unit` is running was sent upstream, when it is the client's. */
export function sentAtOf(unit: Unit | undefined): number | undefined {
  return unit?.kind === "simple" || unit?.kind === "execute" ? unit.started : undefined;
}

function mayWrite(unit: Unit): boolean {
  if (unit.kind === "simple" || unit.kind === "execute") return unit.writes;
  return unit.kind === "injected";
}
