import { performance } from "node:perf_hooks";
import type { Logger } from "pino";
import type { GuardedStatement } from "../guard/index.js";
import {
  type AnswerQueue,
  type InjectedUnit,
  sentAtOf,
  simpleStatementOf,
  sqlOf,
  type Unit,
} from "./answer-queue.js";
import {
  isFatalError,
  readyForQueryStatusOf,
  type TransactionStatus,
  writeCountOf,
} from "./backend-messages.js";
import { CopyOut } from "./copy-framing.js";
import { FRAME_HEADER_LENGTH, type FrameBatch, type RowDecision } from "./frame-reader.js";
import { type SessionSettings, showResult, unreadableSetting } from "./in-band-settings.js";
import { refusedParse, refusedQuery } from "./injected-errors.js";
import { KEPT_ROWS_MAX_BYTES, type KeptRows, keptRowsError } from "./kept-rows.js";
import { BackendCode } from "./message-codes.js";
import type { OutputBatch } from "./output-batch.js";
import type { ProxyTally } from "./proxy-metrics.js";
import type { RelayWire } from "./relay-wire.js";
import { encodePortalSuspended } from "./serializer.js";
import type { CutOffReason, StatementMetering } from "./statement-metering.js";
import type { StatementPolicy } from "./statement-policy.js";
import { StatementTimeBound } from "./statement-time-bound.js";
import { COMMIT_QUERY, ROLLBACK_QUERY } from "./write-transactions.js";

const PORTAL_SUSPENDED = encodePortalSuspended();

export interface UpstreamAnswersOptions {
  queue: AnswerQueue;
  policy: StatementPolicy;
  metering: StatementMetering;
  settings: SessionSettings;
  tally: ProxyTally;
  logger: Logger;
  wire: RelayWire;
}

/**
 * The upstream's side of the statement pipeline: each answer is matched, in order, to the message that asked for
 * it (answer-queue.ts) and relayed, replaced or dropped. Rows are relayed while the metering allows them, and a
 * result it cuts off is cancelled; each statement's end, error and notice goes through the metering
 * (statement-metering.ts). The answers to the proxy's stand-ins are replaced by what the client is owed (a
 * refusal, a `SHOW pgtoll.*` value). A write is relayed only once paid for, and a query the proxy wrapped in a
 * transaction is committed (or rolled back) by it at its ReadyForQuery.
 */
export class UpstreamAnswers {
  readonly #queue: AnswerQueue;
  readonly #policy: StatementPolicy;
  readonly #metering: StatementMetering;
  readonly #settings: SessionSettings;
  readonly #tally: ProxyTally;
  readonly #logger: Logger;
  readonly #wire: RelayWire;
  readonly #toClient: OutputBatch;
  readonly #toUpstream: OutputBatch;
  #copy: CopyOut | undefined;
  /** Set when a result was cut off (or a write undone): upstream answers are dropped until ReadyForQuery. */
  #cutOff = false;
  #fatalRelayed = false;
  /** A large row was admitted from its header (and counted): its DataRow or CopyData is relayed unmetered. */
  #admitted = false;
  /** Bytes of a streamed large row still to relay: nothing else may reach the client inside them. */
  #streamingLeft = 0;
  /** What stopped the running statement for its time while a row was streaming: acted on at the row's end. */
  #stopAfterRow: CutOffReason | undefined;
  /** An error ended a statement since the last ReadyForQuery: an implicit transaction was not committed. */
  #failedSinceReady = false;
  /** When the last statement answered ended: where the next one's time starts. */
  #lastEndAt = 0;
  /** Statements whose time was taken (#statementMs): the time bound tells the running one from the next by it. */
  #timedEnds = 0;
  /** A row or an error of the running statement waits for the ledger: the time bound leaves it alone meanwhile. */
  #awaitingLedger = false;
  /** A statement the time bound stopped, until its error is queued for the client: its ReadyForQuery waits. */
  #stopping: Promise<void> | undefined;
  /** Bounds each statement's time by what pays for it; only when the price counts time. */
  readonly #timeBound: StatementTimeBound | undefined;

  constructor(options: UpstreamAnswersOptions) {
    this.#queue = options.queue;
    this.#policy = options.policy;
    this.#metering = options.metering;
    this.#settings = options.settings;
    this.#tally = options.tally;
    this.#logger = options.logger;
    this.#wire = options.wire;
    this.#toClient = options.wire.toClient;
    this.#toUpstream = options.wire.toUpstream;
    const answers = this;
    this.#timeBound = options.metering.pricesTime
      ? new StatementTimeBound(options.metering, {
          runningSince: () => this.#runningSince(),
          busy: () => !this.#queue.empty,
          get ended() {
            return answers.#timedEnds;
          },
          stop: (reason) => this.#stopForTime(reason),
        })
      : undefined;
  }

  /** A statement of the client's was sent upstream: its time is bounded from now. */
  statementSent(): void {
    this.#timeBound?.arm();
  }

  /** True once the database's own FATAL error went to the client. */
  get fatalRelayed(): boolean {
    return this.#fatalRelayed;
  }

  /** The session ends before the statement being answered did: the rows it delivered are charged. */
  abandon(): void {
    if (this.#cutOff) return;
    const head = this.#queue.head;
    void this.#metering.failStatement(sqlOf(head), this.#statementMs(head));
  }

  /**
   * The session ended: the statement being answered is charged as far as it got (unless cut off, and charged).
   * Writes whose transaction was not committed are not, unless what would commit them was sent already (a Sync,
   * the proxy's COMMIT): its answer is not waited for, and a committed write is never free.
   */
  end(): void {
    this.#timeBound?.close();
    if (!this.#cutOff) this.abandon();
    void this.#metering.settleWrites(this.#queue.mayCommit);
  }

  /** Handles one upstream frame, `buffer[start, end)`; returns a promise when it has to wait for the ledger. */
  handle(code: number, buffer: Buffer, start: number, end: number): Promise<void> | undefined {
    switch (code) {
      case BackendCode.DataRow:
        return this.#onRow(buffer, start, end);
      case BackendCode.CopyData:
        if (this.#copy?.isFraming(buffer, start, end)) {
          this.#admitted = false;
          if (!this.#dropsRows()) this.#toClient.pushRange(buffer, start, end);
          return;
        }
        return this.#onRow(buffer, start, end);
      case BackendCode.CopyOutResponse:
        this.#copy = new CopyOut(this.#runningStatement()?.copyHeader === true, buffer, start);
        if (!this.#cutOff) this.#toClient.pushRange(buffer, start, end);
        return;
      case BackendCode.CommandComplete: {
        const head = this.#queue.head;
        if (head?.kind === "execute") this.#queue.suspendedPortals.delete(head.portal);
        return this.#onStatementEnd(buffer, start, end, writeCountOf(buffer, start, end));
      }
      case BackendCode.PortalSuspended: {
        const head = this.#queue.head;
        if (head?.kind === "execute") this.#queue.suspendedPortals.add(head.portal);
        return this.#onStatementEnd(buffer, start, end, null);
      }
      case BackendCode.EmptyQueryResponse:
        return this.#onStatementEnd(buffer, start, end, null);
      case BackendCode.ErrorResponse:
        return this.#onError(buffer, start, end);
      case BackendCode.NoticeResponse:
        this.#onNotice(buffer, start, end);
        return;
      case BackendCode.ReadyForQuery:
        if (this.#stopping) return this.#stopping.then(() => this.#onReady(buffer, start, end));
        return this.#onReady(buffer, start, end);
      default:
        if (!this.#cutOff) this.#toClient.pushRange(buffer, start, end);
        return;
    }
  }

  /**
   * Relays the DataRows of entry `at` (a run, or one) as far as the metering allows them, as one range: a large
   * result costs a few operations per chunk instead of per row. True when it relayed them all. Otherwise the
   * entry is left with the rows not relayed, for the row-by-row path (a top-up, a cut-off, or rows that are
   * dropped).
   */
  relayRows(frames: FrameBatch, at: number): boolean {
    if (this.#dropsRows() || this.#admitted) return false;
    const count = frames.rows[at]!;
    const buffer = frames.buffers[at]!;
    const start = frames.starts[at]!;
    const end = frames.ends[at]!;
    if (this.#metering.pricesTables) this.#metering.priceStatement(this.#runningStatement());
    const allowed = this.#metering.allowRows(count, end - start - count * FRAME_HEADER_LENGTH);
    if (allowed === 0) return false;
    const head = this.#queue.head;
    if (head?.kind === "execute" && head.kept) {
      const rowsEnd = allowed === count ? end : frames.shiftMessages(at, allowed);
      for (let offset = start; offset < rowsEnd && !this.#cutOff; ) {
        const next = offset + 1 + buffer.readInt32BE(offset + 1);
        this.#relayRow(buffer, offset, next);
        offset = next;
      }
      return allowed === count;
    }
    this.#tally.rowsRelayed += allowed;
    if (allowed === count) {
      this.#toClient.pushRange(buffer, start, end);
      return true;
    }
    this.#toClient.pushRange(buffer, start, frames.shiftMessages(at, allowed));
    return false;
  }

  /**
   * Rows now are neither delivered nor charged: the result was cut off, the client is gone, or they answer the
   * stand-in of a `SHOW pgtoll.*` (the proxy answers it itself).
   */
  #dropsRows(): boolean {
    return this.#cutOff || this.#wire.closing() === "gone" || this.#queue.head?.kind === "setting";
  }

  /**
   * A row longer than the frame reader reads unasked, seen by its header alone (`bytes` its payload): whether it
   * is relayed (counted now as `#onRow` would: "stream", or "read" whole when kept, see `#admit`) or skipped
   * unread ("skip"): a row over the cap,
   * or one the agent cannot pay for, cuts the result off (nothing charged for it), and a row that is dropped
   * anyway is not read either.
   */
  admitRow(bytes: number): RowDecision | Promise<RowDecision> {
    if (this.#dropsRows()) return "skip";
    if (bytes > this.#metering.maxRowBytes) return this.#cutOffResult("row-too-large").then(() => "skip");
    if (this.#metering.pricesTables) this.#metering.priceStatement(this.#runningStatement());
    if (this.#metering.allowRows(1, bytes) === 1) return this.#admit(bytes);
    return this.#metering.fundRow(bytes).then(async (cutOff) => {
      if (cutOff) {
        await this.#cutOffResult(cutOff);
        return "skip";
      }
      return this.#admit(bytes);
    });
  }

  /**
   * A paid large row goes to the client as it arrives ("stream"), so a session never holds one whole; one that a
   * write's Execute row limit keeps for later (kept-rows.ts) is read whole ("read") and kept.
   */
  #admit(bytes: number): RowDecision {
    const head = this.#queue.head;
    const kept = head?.kind === "execute" ? head.kept : undefined;
    if (kept && !kept.relaysNext) {
      this.#admitted = true;
      return "read";
    }
    this.#tally.rowsRelayed++;
    if (kept) kept.relayed++;
    // A COPY's header line is its first CopyData: one this large is past it.
    this.#copy?.rowPassed();
    this.#streamingLeft = bytes + FRAME_HEADER_LENGTH;
    return "stream";
  }

  /** Relays a piece of the streamed row, `buffer[start, end)`; at the row's end, a time stop put off is made. */
  relayPiece(buffer: Buffer, start: number, end: number): void {
    this.#toClient.pushRange(buffer, start, end);
    this.#streamingLeft -= end - start;
    if (this.#streamingLeft > 0 || this.#stopAfterRow === undefined) return;
    const reason = this.#stopAfterRow;
    this.#stopAfterRow = undefined;
    this.#stopForTime(reason, true);
  }

  /**
   * The upstream is read even while the client does not read (the relay does not pause it for the client): while a
   * time stop waits for the end of the row being streamed, and while a cut-off result's rest, which is discarded,
   * comes in. The statement is cancelled then, but a backend blocked in sending a row does not see its cancel: a
   * client that stops reading would otherwise hold it past what was paid for.
   */
  get drainsUpstream(): boolean {
    return this.#stopAfterRow !== undefined || this.#cutOff;
  }

  #onRow(buffer: Buffer, start: number, end: number): Promise<void> | undefined {
    if (this.#admitted) {
      this.#admitted = false;
      if (!this.#dropsRows()) this.#relayRow(buffer, start, end);
      return;
    }
    if (this.#dropsRows()) return;
    if (this.#metering.pricesTables) this.#metering.priceStatement(this.#runningStatement());
    const bytes = end - start - FRAME_HEADER_LENGTH;
    if (this.#metering.allowRows(1, bytes) === 1) return void this.#relayRow(buffer, start, end);
    this.#awaitingLedger = true;
    return this.#metering.fundRow(bytes).then((cutOff) => {
      this.#awaitingLedger = false;
      return cutOff ? this.#cutOffResult(cutOff) : this.#relayRow(buffer, start, end);
    });
  }

  /** Relays a paid row, or keeps it when it is past the row limit of a write's Execute (kept-rows.ts). */
  #relayRow(buffer: Buffer, start: number, end: number): void {
    this.#tally.rowsRelayed++;
    const head = this.#queue.head;
    const kept = head?.kind === "execute" ? head.kept : undefined;
    if (!kept || kept.relaysNext) {
      if (kept) kept.relayed++;
      this.#toClient.pushRange(buffer, start, end);
      return;
    }
    kept.keep(buffer.subarray(start, end));
    if (this.#queue.keptBytes(kept) > KEPT_ROWS_MAX_BYTES) this.#refuseKeptRows();
  }

  /** A write's rows past its Execute's row limit are more than the proxy keeps: it is undone, as a cut-off write. */
  #refuseKeptRows(): void {
    this.#cutOff = true;
    this.#tally.writesUndone++;
    this.#metering.failStatement(sqlOf(this.#queue.head));
    this.#toClient.push(keptRowsError());
    this.#wire.cancelUpstream();
  }

  /**
   * The time on the provider's database of the statement `head` is answering, when the price counts time: from
   * when it was sent, or from the previous statement's end when that came later (statements of one query, or
   * pipelined), to now. A slow client's reading counts: the upstream backend is held by the statement meanwhile.
   */
  #statementMs(head: Unit | undefined): number | undefined {
    if (!this.#metering.pricesTime) return undefined;
    const now = performance.now();
    const sentAt = sentAtOf(head);
    if (sentAt === undefined) return undefined;
    const started = sentAt < this.#lastEndAt ? this.#lastEndAt : sentAt;
    this.#lastEndAt = now;
    this.#timedEnds++;
    const ms = now - started;
    return ms > 0 ? ms : 0;
  }

  /** When the running statement's time began, for the time bound (#statementMs counts it from there). */
  #runningSince(): number | undefined {
    if (this.#cutOff || this.#awaitingLedger || this.#wire.closing() === "gone") return undefined;
    const sentAt = sentAtOf(this.#queue.head);
    if (sentAt === undefined) return undefined;
    return sentAt < this.#lastEndAt ? this.#lastEndAt : sentAt;
  }

  /** The time bound stops the running statement: as a cut-off, outside the relay's pass, so the error is sent now. */
  #stopForTime(reason: CutOffReason, cancelled = false): void {
    if (this.#cutOff) return;
    if (this.#streamingLeft > 0) {
      // The error may not land inside a row's bytes: it follows the row's end. The statement is cancelled now, and
      // the rest of the row is read whatever the client reads (`drainsUpstream`), so a client that stops reading
      // mid-row does not hold the provider's backend past what was paid for; the row's rest waits in pgtoll.
      if (this.#stopAfterRow === undefined) {
        this.#stopAfterRow = reason;
        this.#wire.cancelUpstream();
        this.#wire.readUpstream();
      }
      return;
    }
    const stopping = this.#cutOffResult(reason, cancelled).then(
      () => {
        this.#stopping = undefined;
        this.#wire.flushToClient();
      },
      (error: unknown) => {
        this.#stopping = undefined;
        this.#logger.error({ err: error }, "a statement stopped for its time was not charged");
      },
    );
    this.#stopping = stopping;
  }

  /** The statement the upstream is answering, when the relay knows it. */
  #runningStatement(): GuardedStatement | undefined {
    const head = this.#queue.head;
    if (head?.kind === "simple") return simpleStatementOf(head);
    if (head?.kind !== "execute" || head.sql === "") return undefined;
    return this.#policy.statementOf(head.sql);
  }

  /**
   * The result ends before its last row (statement-metering.ts says why): the client gets the error in place of
   * the rest, which is cancelled. A write cut off in its RETURNING rows is not committed.
   */
  async #cutOffResult(reason: CutOffReason, cancelled = false): Promise<void> {
    this.#cutOff = true;
    const head = this.#queue.head;
    if (head?.kind === "simple" && head.writes) head.failed = true;
    // Cancelled before the charge is awaited (unless a time stop inside a streamed row already did, whose second
    // cancel could reach the next statement): the database's time ends as soon as it can.
    if (!cancelled) this.#wire.cancelUpstream();
    // The rest is discarded: read whatever the client does (`drainsUpstream`).
    this.#wire.readUpstream();
    const error = await this.#metering.cutOff(sqlOf(head), reason, this.#statementMs(head));
    this.#tally.cutOff++;
    this.#toClient.push(error);
  }

  /** A statement's result is complete; `written` is the row count of a write's CommandComplete. */
  #onStatementEnd(
    buffer: Buffer,
    start: number,
    end: number,
    written: number | null,
  ): Promise<void> | undefined {
    const head = this.#queue.head;
    // BEGIN, COMMIT or ROLLBACK the proxy sent: not the client's.
    if (head?.kind === "injected") return;
    this.#copy = undefined;
    if (this.#cutOff) {
      if (head?.kind === "kept") this.#queue.shift();
      if (head?.kind === "execute") {
        this.#queue.shift();
        // The cancel came too late and the write completed: it must not commit at the client's Sync.
        if (head.writes && written !== null) this.#abortExtendedWrite();
      }
      return;
    }
    if (head?.kind === "setting") return this.#endSetting(head.name);
    if (head?.kind === "kept") return void this.#relayKept(head);
    if (this.#metering.pricesTables) this.#metering.priceStatement(this.#runningStatement());
    const ms = this.#statementMs(head);
    const sql = sqlOf(head);
    const shape = simpleStatementOf(head)?.shape;
    const last = head?.kind === "simple" && head.index === head.statements.length - 1;
    if (head?.kind === "simple") head.index++;
    else if (head?.kind === "execute") {
      this.#tally.upstreamLatency.observe((performance.now() - head.started) / 1000);
      this.#queue.shift();
    }
    if (written !== null) return this.#endWrite(head, written, sql, buffer, start, end, last, ms);
    // Outside a block, Executes share an implicit transaction: past a statement that is not a write (a COMMIT,
    // a SAVEPOINT, a read), the writes before it are charged, whatever the pipeline's end.
    const settled = head?.kind === "execute" ? this.#metering.settleWrites(true) : undefined;
    // A portal read in several Executes is one statement: its minimum is charged with its first batch only.
    const continued = head?.kind === "execute" && head.continued;
    const ended = this.#metering.endStatement(sql, buffer, start, ms, continued, shape);
    if (typeof ended === "string") return this.#cutOffResult(ended);
    this.#relayComplete(head, buffer, start, end, last);
    return ended ?? settled;
  }

  /**
   * Relays a CommandComplete; the last one of a wrapped query is kept until its COMMIT succeeded, as PostgreSQL
   * commits a query's implicit transaction before it reports the query's last statement complete.
   */
  #relayComplete(head: Unit | undefined, buffer: Buffer, start: number, end: number, last: boolean): void {
    if (last && head?.kind === "simple" && head.wrapped) head.held = Buffer.from(buffer.subarray(start, end));
    else if (head?.kind === "execute" && head.kept)
      this.#endLimitedWrite(head.portal, head.kept, buffer, start, end);
    else this.#toClient.pushRange(buffer, start, end);
  }

  /**
   * A write executed with a row limit completed, paid: the client gets PostgreSQL's answer to that Execute, its
   * CommandComplete, or PortalSuspended when it returned the limit's rows (the rest are kept for the portal).
   */
  #endLimitedWrite(portal: string, kept: KeptRows, buffer: Buffer, start: number, end: number): void {
    if (!kept.suspended) return void this.#toClient.pushRange(buffer, start, end);
    kept.tag = buffer.toString("latin1", start + FRAME_HEADER_LENGTH, end - 1);
    this.#queue.keptPortals.set(portal, kept);
    this.#toClient.push(PORTAL_SUSPENDED);
  }

  /** An Execute of a portal whose rows are kept: the upstream's empty answer gives way to the next of them. */
  #relayKept(head: Extract<Unit, { kind: "kept" }>): void {
    this.#queue.shift();
    const { frames, done } = head.rows.take(head.maxRows);
    if (done && this.#queue.keptPortals.get(head.portal) === head.rows)
      this.#queue.keptPortals.delete(head.portal);
    for (const frame of frames) this.#toClient.push(frame);
  }

  /**
   * A write completed, uncommitted: relayed once it is paid for, and otherwise undone (the client gets the error
   * in place of its count). A write whose client is gone is not paid for: its transaction is never committed.
   */
  #endWrite(
    head: Unit | undefined,
    written: number,
    sql: string,
    buffer: Buffer,
    start: number,
    end: number,
    last: boolean,
    ms: number | undefined,
  ): Promise<void> | undefined {
    if (this.#wire.closing() === "gone") return this.#metering.failStatement(sql, ms);
    const paid = this.#metering.endWrite(written, sql, ms, this.#commitsLater(head));
    if (paid === true) return void this.#relayComplete(head, buffer, start, end, last);
    if (Buffer.isBuffer(paid)) return void this.#failWrite(head, paid);
    return paid.then((verdict) =>
      verdict === true ? this.#relayComplete(head, buffer, start, end, last) : this.#failWrite(head, verdict),
    );
  }

  /**
   * Whether the write `head` answers commits only later, with a transaction its query did not open: the one the
   * proxy wraps around a simple query, or the implicit transaction of Executes outside a block, which their
   * Sync commits (unless a statement fails first).
   */
  #commitsLater(head: Unit | undefined): boolean {
    if (head?.kind === "simple") return head.wrapped;
    return head?.kind === "execute" && this.#queue.status === "I";
  }

  /**
   * Undoes a write that must not commit. In a simple query the client gets `error` now and the rest of the
   * query's answers are dropped; at its ReadyForQuery the proxy rolls back (or aborts the client's transaction
   * block). In the extended protocol a stand-in that fails is sent at once (the client's next frames wait for
   * this write): the upstream aborts the transaction and skips to Sync, as after a failed statement.
   */
  #failWrite(head: Unit | undefined, error: Buffer): void {
    this.#tally.writesUndone++;
    if (head?.kind === "simple") {
      head.failed = true;
      this.#cutOff = true;
      this.#toClient.push(error);
      return;
    }
    this.#abortExtendedWrite(error);
  }

  #abortExtendedWrite(error?: Buffer): void {
    this.#queue.push(error ? { kind: "refused", error } : { kind: "refused" });
    this.#toUpstream.push(refusedParse);
    this.#wire.flushToUpstream();
  }

  /** The stand-in of `SHOW pgtoll.<name>` completed upstream: the client gets the value instead. */
  #endSetting(name: string): Promise<void> {
    this.#queue.shift();
    return this.#settings.value(name).then(
      (value) => void this.#toClient.push(showResult(value)),
      (error: unknown) => void this.#toClient.push(unreadableSetting(this.#logger, error)),
    );
  }

  /**
   * An ErrorResponse. The proxy's own stand-ins' errors are replaced or swallowed; the database's reaches the
   * client as the metering has it (charged, or its text withheld) and ends the statement.
   */
  #onError(buffer: Buffer, start: number, end: number): Promise<void> | undefined {
    const head = this.#queue.head;
    if (head?.kind !== "injected") this.#failedSinceReady = true;
    if (head?.kind === "refused") {
      this.#queue.shift();
      if (head.error) this.#toClient.push(head.error);
      this.#queue.dropUntilSync();
      return;
    }
    if (head?.kind === "injected") {
      // A COMMIT that failed (a deferred constraint) tells the client why; an abort's stand-in fails on purpose.
      if (head.role === "end") head.error = this.#metering.commitErrorOf(buffer, start, end, head.statements);
      return;
    }
    if (this.#cutOff || this.#wire.closing() === "gone") {
      if (head?.kind === "execute" || head?.kind === "kept") this.#queue.shift();
      this.#queue.dropUntilSync();
      return;
    }
    // An error that comes before any row (an Execute that fails at once) is charged at its statement's price too.
    if (this.#metering.pricesTables) this.#metering.priceStatement(this.#runningStatement());
    const error = this.#metering.errorOf(buffer, start, end, this.#runningStatement());
    if (Buffer.isBuffer(error)) return this.#relayError(head, error);
    this.#awaitingLedger = true;
    return error.then((relayed) => {
      this.#awaitingLedger = false;
      return this.#relayError(head, relayed);
    });
  }

  /** Ends the failed statement (its rows, the error's row and its time charged) and relays `error`. */
  #relayError(head: Unit | undefined, error: Buffer): Promise<void> | undefined {
    if (isFatalError(error)) this.#fatalRelayed = true;
    const charged = this.#metering.failStatement(sqlOf(head), this.#statementMs(head));
    if (head?.kind === "execute" || head?.kind === "kept") this.#queue.shift();
    this.#queue.dropUntilSync();
    this.#toClient.push(error);
    return charged;
  }

  /** A NoticeResponse; those answering the proxy's own statements, or dropped answers, are dropped. */
  #onNotice(buffer: Buffer, start: number, end: number): void {
    const head = this.#queue.head;
    if (
      this.#cutOff ||
      this.#wire.closing() === "gone" ||
      head?.kind === "injected" ||
      head?.kind === "refused"
    )
      return;
    const notice = this.#metering.noticeOf(buffer, start, end, head !== undefined, this.#runningStatement());
    if (notice) this.#toClient.push(notice);
  }

  /** Returns a promise when the writes charged at this point make the session wait for the ledger. */
  #onReady(buffer: Buffer, start: number, end: number): Promise<void> | undefined {
    const now = performance.now();
    const status = readyForQueryStatusOf(buffer, start, end);
    const head = this.#queue.head;
    if (head?.kind === "injected") {
      this.#queue.shift();
      return this.#endInjected(head, status, buffer, start, end, now);
    }
    const closed = this.#queue.closeAtReady();
    if (closed) this.#tally.upstreamLatency.observe((now - closed.started) / 1000);
    this.#queue.status = status;
    // Portals end with their transaction.
    if (status === "I") {
      this.#queue.suspendedPortals.clear();
      this.#queue.keptPortals.clear();
    }
    this.#cutOff = false;
    const statementFailed = this.#failedSinceReady;
    this.#failedSinceReady = false;
    if (closed?.writes && !this.#wire.closing()) {
      // The writes are paid for (or failed): the proxy ends its own transaction, or aborts the client's.
      if (closed.wrapped) {
        const failed = closed.failed || status === "E";
        if (failed) void this.#metering.settleWrites(false);
        this.#inject(
          { kind: "injected", role: "end", held: closed.held, statements: closed.statements },
          failed ? ROLLBACK_QUERY : COMMIT_QUERY,
        );
        return;
      }
      if (closed.failed && status === "T") {
        this.#inject({ kind: "injected", role: "abort" }, refusedQuery);
        return;
      }
    }
    // Executes' writes: committed at this Sync unless a statement failed outside a block; inside one (the
    // pipeline opened it) they are charged as the agent's block's writes are. A wrapped query's writes wait for
    // the proxy's COMMIT, which a client that is gone never gets.
    const waiting = closed?.wrapped
      ? undefined
      : this.#metering.settleWrites(status !== "I" || !statementFailed);
    return this.#passReady(buffer, start, end, status, now, waiting);
  }

  /**
   * Passes a query's ReadyForQuery on to the client, once what the query cost is written when the session asks
   * for that (`pgtoll.synchronous_charges`); returns `waiting`, what the upstream waits for.
   */
  #passReady(
    buffer: Buffer,
    start: number,
    end: number,
    status: TransactionStatus,
    now: number,
    waiting: Promise<void> | undefined,
  ): Promise<void> | undefined {
    const idle = status === "I" && this.#queue.empty;
    // Queries pipelined behind this one are answered next: their charges can join this one's batch.
    const written = this.#wire.closing() ? undefined : this.#metering.queryAnswered(!this.#queue.empty);
    // The answer from its ReadyForQuery on waits for the charge; the upstream's next answers are read meanwhile,
    // so the charges of a pipelining client's queries are written together.
    if (written) this.#wire.holdClientOutput(written);
    const report = this.#wire.closing() ? undefined : this.#metering.queryCostReport();
    if (report) this.#toClient.push(report);
    this.#toClient.pushRange(buffer, start, end);
    if (idle) this.#wire.becameIdle(now);
    return waiting;
  }

  /** Sends a statement of the proxy's own that the write the client waits for now depends on. */
  #inject(unit: InjectedUnit, query: Buffer): void {
    this.#queue.pushInjected(unit);
    this.#toUpstream.push(query);
    this.#wire.flushToUpstream();
  }

  /** The proxy's own statement is answered: the client gets the held tag or the COMMIT's error, then its status. */
  #endInjected(
    unit: InjectedUnit,
    status: TransactionStatus,
    buffer: Buffer,
    start: number,
    end: number,
    now: number,
  ): Promise<void> | undefined {
    if (unit.role === "begin") return;
    // The proxy's COMMIT (or ROLLBACK, after which nothing is pending) ended the writes' transaction.
    const waiting = unit.role === "end" ? this.#metering.settleWrites(unit.error === undefined) : undefined;
    if (unit.error) this.#toClient.push(unit.error);
    else if (unit.held) this.#toClient.push(unit.held);
    this.#queue.status = status;
    return this.#passReady(buffer, start, end, status, now, waiting);
  }
}
