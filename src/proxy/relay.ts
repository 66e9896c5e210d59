import type { Socket } from "node:net";
import { performance } from "node:perf_hooks";
import type { Logger } from "pino";
import { SqlState } from "../db/sql-state.js";
import type { GuardedStatement } from "../guard/index.js";
import {
  isFatalError,
  readyForQueryStatusOf,
  type TransactionStatus,
  writeCountOf,
} from "./backend-messages.js";
import { CopyOut } from "./copy-framing.js";
import {
  FRAME_HEADER_LENGTH,
  FRONTEND_MAX_FRAME_LENGTH,
  type Frame,
  FrameBatch,
  FrameReader,
} from "./frame-reader.js";
import {
  decodeBindTarget,
  decodeClose,
  decodeExecute,
  decodeParse,
  decodeQuery,
} from "./frontend-messages.js";
import {
  localShowAnswer,
  type SessionSettings,
  showResult,
  standInParse,
  standInQuery,
} from "./in-band-settings.js";
import { refusedParse, refusedQuery } from "./injected-errors.js";
import { BackendCode, FrontendCode } from "./message-codes.js";
import { ledgerUnavailable } from "./metering-errors.js";
import { OutputBatch } from "./output-batch.js";
import { type PreparedStatement, PreparedStatements } from "./prepared-statements.js";
import { ProtocolViolationError } from "./protocol-violation-error.js";
import { errorFrame } from "./proxy-errors.js";
import type { ProxyMetrics, ProxyTally } from "./proxy-metrics.js";
import {
  dropUntilSync,
  type InjectedUnit,
  mayWrite,
  type SimpleUnit,
  sentAtOf,
  sqlOf,
  type Unit,
} from "./relay-units.js";
import { encodeReadyForQuery, encodeTerminate } from "./serializer.js";
import type { CutOffReason, StatementMetering } from "./statement-metering.js";
import type { StatementPolicy } from "./statement-policy.js";
import { BEGIN_QUERY, COMMIT_QUERY, FLUSH, ROLLBACK_QUERY } from "./write-transactions.js";

export interface RelayDeps {
  client: Socket;
  upstream: Socket;
  /** What each message carrying SQL may do (statement-policy.ts). */
  policy: StatementPolicy;
  /** What is paid for: starts, rows, statement ends, writes, database errors (statement-metering.ts). */
  metering: StatementMetering;
  /** The session's `SHOW pgtoll.*` settings: their values (the relay only carries them). */
  settings: SessionSettings;
  metrics: ProxyMetrics;
  logger: Logger;
  cancelUpstream(): void;
  status: TransactionStatus;
  /** After this long idle outside a transaction the session gives back its unspent reservation. */
  idleReleaseMs: number;
  /** How long a closing session waits for the upstream to finish what was forwarded (default 15 s). */
  drainTimeoutMs?: number;
  onEnd(reason: string): void;
}

/** One direction of the relay: frames read from its socket, handled strictly in order. */
interface Direction {
  readonly side: "client" | "upstream";
  readonly reader: FrameReader;
  /** Read and not handled yet: more arrive here while a frame waits for the ledger. */
  readonly frames: FrameBatch;
  /** A pass over `frames` is running, or paused on the ledger (then the socket is paused too). */
  busy: boolean;
}

/**
 * The ready phase of a proxied session, as a protocol: client messages are forwarded and upstream answers
 * relayed in order, as ranges of the received chunks (a relayed message costs no allocation). What a statement
 * may do is the policy's to say, and what is paid for the metering's: the relay asks them at each step and does
 * what they answer. Both directions are processed frame by frame; a pass that has to wait (for the ledger)
 * pauses its socket until the answer is in, so order is never lost and memory stays bounded.
 */
export class Relay {
  readonly #units: Unit[] = [];
  readonly #prepared = new PreparedStatements();
  /** The write the client's frames wait for: resolved once `unit` has left the queue (paid, or undone). */
  #pendingWrite: { unit: Unit; resolve: () => void } | undefined;
  /** A write query waits for everything before it to be answered, to know whether a transaction is open. */
  #onDrained: (() => void) | undefined;
  #copy: CopyOut | undefined;
  readonly #client: Direction = {
    side: "client",
    reader: new FrameReader({ maxFrameLength: FRONTEND_MAX_FRAME_LENGTH }),
    frames: new FrameBatch(),
    busy: false,
  };
  readonly #upstream: Direction = {
    side: "upstream",
    reader: new FrameReader({ dataRowRuns: true }),
    frames: new FrameBatch(),
    busy: false,
  };
  readonly #toClient = new OutputBatch();
  readonly #toUpstream = new OutputBatch();
  readonly #tally: ProxyTally;
  readonly #policy: StatementPolicy;
  readonly #metering: StatementMetering;
  #status: TransactionStatus;
  /** Set when a result was cut off (or a write undone): upstream answers are dropped until ReadyForQuery. */
  #cutOff = false;
  #ended = false;
  /**
   * Set when the client is done while statements are still upstream: "terminated" (it sent Terminate; their
   * results still go to it) or "gone" (its socket closed or it broke the protocol; they are cancelled).
   * Either way nothing more is read from the client and the session ends once the upstream has answered and
   * closed.
   */
  #closing: "terminated" | "gone" | undefined;
  #drainTimer: NodeJS.Timeout | undefined;
  /**
   * When the session last became idle (ReadyForQuery outside a transaction, nothing upstream); cleared by
   * client traffic. One timer checks it, so a statement costs no timer of its own.
   */
  #idleSince: number | undefined;
  #idleTimer: NodeJS.Timeout | undefined;
  #fatalRelayed = false;
  /** Set by `endWhenIdle`: the FATAL that ends the session at its next idle moment. */
  #farewell: { frame: Buffer; reason: string } | undefined;

  constructor(private readonly deps: RelayDeps) {
    this.#status = deps.status;
    this.#tally = deps.metrics.tally;
    this.#policy = deps.policy;
    this.#metering = deps.metering;
  }

  get status(): TransactionStatus {
    return this.#status;
  }

  /** True once the client sent Terminate or went away; the upstream closing is then expected. */
  get closing(): boolean {
    return this.#closing !== undefined;
  }

  /**
   * True once the database's own FATAL error went to the client: the upstream's close that follows needs no
   * second error, as a client hears one FATAL from PostgreSQL.
   */
  get fatalRelayed(): boolean {
    return this.#fatalRelayed;
  }

  /**
   * Ends the session with `frame` (a FATAL) once it is idle outside a transaction: at once if it is now, else
   * right after the ReadyForQuery that leaves it so. A stopping server lets its sessions finish their work so.
   */
  endWhenIdle(frame: Buffer, reason: string): void {
    if (this.#ended || this.#closing) return;
    this.#farewell = { frame, reason };
    const idle = this.#status === "I" && this.#units.length === 0;
    if (idle && !this.#client.busy && !this.#upstream.busy) this.#sayFarewell();
  }

  #sayFarewell(): void {
    const farewell = this.#farewell!;
    // After the ReadyForQuery still in the batch, so the client sees its statement complete first.
    this.#toClient.push(farewell.frame);
    this.#toClient.flushTo(this.deps.client);
    this.end(farewell.reason);
  }

  /** Starts relaying; `early` holds client frames that arrived with the password message. */
  start(early: Frame[] = []): void {
    const { client, upstream } = this.deps;
    for (const frame of early) this.#client.frames.addFrame(frame);
    client.on("data", (chunk: Buffer) => this.#receive(this.#client, chunk));
    upstream.on("data", (chunk: Buffer) => this.#receive(this.#upstream, chunk));
    // A pass waiting for the ledger keeps its socket paused: resuming it early would queue a whole result.
    client.on("drain", () => {
      if (!this.#upstream.busy) upstream.resume();
    });
    upstream.on("drain", () => {
      if (!this.#client.busy) client.resume();
    });
    upstream.resume();
    client.resume();
    if (early.length > 0) this.#pump(this.#client);
  }

  #receive(direction: Direction, chunk: Buffer): void {
    if (this.#ended) return;
    if (direction === this.#client) {
      if (this.#closing) return;
      this.#idleSince = undefined;
      this.#tally.bytesFromClient += chunk.length;
    } else {
      this.#tally.bytesFromUpstream += chunk.length;
    }
    try {
      direction.reader.feedInto(chunk, direction.frames);
    } catch (error) {
      this.#protocolFailure(direction.side, error as Error);
      return;
    }
    this.#pump(direction);
  }

  #protocolFailure(side: "client" | "upstream", error: Error): void {
    this.deps.logger.debug({ err: error, side }, "protocol violation");
    if (side === "client") {
      const message = `invalid message from client: ${error.message}`;
      this.deps.client.end(errorFrame(SqlState.protocolViolation, message, { fatal: true }));
      this.#close("gone", "client protocol violation");
      return;
    }
    const message = "invalid message from the provider's database";
    this.deps.client.write(errorFrame(SqlState.connectionFailure, message, { fatal: true }));
    this.end("upstream protocol violation");
  }

  /** The client's socket closed: what it left upstream is cancelled and charged, then the session ends. */
  clientGone(): void {
    this.#close("gone", "client closed");
  }

  /**
   * Ends the client's side of the session. With nothing upstream the session ends now; otherwise the
   * upstream gets Terminate after what was forwarded and is read to its end, bounded by `drainTimeoutMs`: a
   * COMMIT the proxy sent completes, and a write whose client went away before it was answered is rolled back by
   * the Terminate (the proxy commits a write only after it is paid, and never for a client that is gone).
   */
  #close(how: "terminated" | "gone", reason: string): void {
    if (this.#ended || this.#closing === "gone") return;
    if (this.#units.length === 0 && !this.#upstream.busy) {
      this.end(reason);
      return;
    }
    if (how === "gone" && !this.#units.some(mayWrite)) {
      // Only reads are left: charge the rows already handed over and drop the upstream, rather than read (and
      // parse) the rest of a result that may fill megabytes of socket buffers. The cancel stops a statement
      // that sends nothing for a while (the server would notice the closed socket only when it next writes).
      this.deps.cancelUpstream();
      this.#metering.failStatement(sqlOf(this.#units[0]));
      this.end(reason);
      return;
    }
    if (how === "gone") {
      this.deps.cancelUpstream();
      this.deps.upstream.resume();
    }
    if (!this.#closing) {
      const { upstream } = this.deps;
      this.#toUpstream.flushTo(upstream);
      if (!upstream.destroyed) upstream.end(encodeTerminate());
      const timeoutMs = this.deps.drainTimeoutMs ?? 15_000;
      const late = `${reason}; the upstream did not finish in time`;
      this.#drainTimer = setTimeout(() => this.end(late), timeoutMs);
      this.#drainTimer.unref();
    }
    this.#closing = how;
  }

  /** Stops relaying; the session closes both sockets. Idempotent. */
  end(reason: string): void {
    if (this.#ended) return;
    this.#ended = true;
    // Rows of a statement the upstream never finished (it closed, or broke the protocol) reached the client.
    if (!this.#cutOff) this.#metering.failStatement(sqlOf(this.#units[0]));
    clearTimeout(this.#idleTimer);
    clearTimeout(this.#drainTimer);
    this.#client.frames.clear();
    this.#upstream.frames.clear();
    // Whatever waits for the upstream is let go: the passes see the session ended and stop.
    this.#pendingWrite?.resolve();
    this.#pendingWrite = undefined;
    this.#onDrained?.();
    this.#onDrained = undefined;
    this.deps.onEnd(reason);
  }

  // ---- both directions ----------------------------------------------------------------------------

  /**
   * Handles the direction's frames in order until they are all done or one has to wait for the ledger; then
   * writes what the pass produced. A client pass stops for good once the client is closing.
   */
  #pump(direction: Direction): void {
    if (direction.busy) return;
    direction.busy = true;
    const fromClient = direction === this.#client;
    const { frames } = direction;
    try {
      while (frames.head < frames.length && !this.#ended && !(fromClient && this.#closing)) {
        const at = frames.head;
        const code = frames.codes[at]!;
        const buffer = frames.buffers[at]!;
        let end = frames.ends[at]!;
        if (code === BackendCode.DataRow && !fromClient) {
          // A run of DataRows (or one): relayed at once as far as the reservation pays, the rest one by one.
          if (this.#relayRows(frames, at)) {
            frames.head++;
            continue;
          }
        }
        const start = frames.starts[at]!;
        // One row of a run is handled now; the entry keeps the others for the next pass.
        if (frames.rows[at]! > 1) end = frames.shiftMessage(at);
        else frames.head++;
        const waiting = fromClient
          ? this.#handleClientFrame(code, buffer, start, end)
          : this.#handleUpstreamFrame(code, buffer, start, end);
        if (waiting) {
          this.#wait(direction, waiting);
          return;
        }
      }
      frames.clear();
      if (fromClient) this.#flushToUpstream();
      else {
        this.#flushToClient();
        this.#releaseWaiters();
      }
    } catch (error) {
      this.#protocolFailure(direction.side, error as Error);
    }
    direction.busy = false;
  }

  /** Lets the client's frames go on once the write they wait for, or the queue a write query waits for, is done. */
  #releaseWaiters(): void {
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

  /** Pauses the direction's socket until `waiting` settles, then carries on with its next frame. */
  #wait(direction: Direction, waiting: Promise<void>): void {
    const { client, upstream } = this.deps;
    if (direction === this.#client) {
      client.pause();
      this.#flushToUpstream();
    } else {
      upstream.pause();
      this.#flushToClient();
    }
    waiting.then(
      () => {
        direction.busy = false;
        if (direction === this.#client) {
          if (this.#closing) return;
          if (!upstream.writableNeedDrain) client.resume();
        } else {
          // A slow client keeps the upstream paused: its 'drain' resumes it, not the ledger's answer.
          const clientWaiting = this.#closing !== "gone" && client.writableNeedDrain;
          if (!clientWaiting) upstream.resume();
        }
        this.#pump(direction);
      },
      (error: unknown) => this.#internalFailure(error),
    );
  }

  // ---- client -> upstream -------------------------------------------------------------------------

  #flushToUpstream(): void {
    // Once closing, the upstream has had its Terminate: nothing may follow it.
    if (this.#closing) return;
    if (!this.#toUpstream.flushTo(this.deps.upstream)) this.deps.client.pause();
  }

  /** Handles one client frame, `buffer[start, end)`; returns a promise when it has to wait for the ledger. */
  #handleClientFrame(code: number, buffer: Buffer, start: number, end: number): Promise<void> | undefined {
    switch (code) {
      case FrontendCode.Query:
        return this.#onQuery(buffer, start, end);
      case FrontendCode.Parse: {
        const { name, sql } = decodeParse(payloadOf(buffer, start, end));
        const statement = this.#policy.parse(sql);
        if (Buffer.isBuffer(statement)) {
          this.#prepared.parsed(name, undefined);
          return void this.#refuse(statement, false);
        }
        this.#prepared.parsed(name, statement);
        // A setting's stand-in is prepared under the client's statement name.
        if (statement.setting !== undefined)
          return void this.#toUpstream.push(standInParse(name, statement.setting));
        // The server parses and analyses it: nothing reaches the provider's database unfunded.
        return this.#forwardFunded(buffer, start, end);
      }
      case FrontendCode.Bind: {
        const bind = decodeBindTarget(payloadOf(buffer, start, end));
        this.#prepared.bound(bind.portal, bind.statement);
        // Binding plans the statement (and may evaluate its functions): funded first too.
        return this.#forwardFunded(buffer, start, end);
      }
      case FrontendCode.Execute:
        return this.#onExecute(buffer, start, end);
      case FrontendCode.Sync:
        this.#units.push({ kind: "sync" });
        this.#toUpstream.pushRange(buffer, start, end);
        return;
      case FrontendCode.Close: {
        const target = decodeClose(payloadOf(buffer, start, end));
        this.#prepared.closed(target.kind, target.name);
        this.#toUpstream.pushRange(buffer, start, end);
        return;
      }
      case FrontendCode.FunctionCall:
        this.#refuse(this.#policy.functionCallRefusal, true);
        return;
      case FrontendCode.Terminate:
        this.#close("terminated", "client terminated");
        return;
      case FrontendCode.Describe:
      case FrontendCode.Flush:
      case FrontendCode.CopyData:
      case FrontendCode.CopyDone:
      case FrontendCode.CopyFail:
        // No SQL in them, and no data back: the upstream judges them.
        this.#toUpstream.pushRange(buffer, start, end);
        return;
      default:
        // As PostgreSQL does; nothing unknown reaches the provider's database.
        throw new ProtocolViolationError(`invalid frontend message type ${code}`);
    }
  }

  #onQuery(buffer: Buffer, start: number, end: number): Promise<void> | undefined {
    const plan = this.#policy.query(decodeQuery(payloadOf(buffer, start, end)).sql);
    if (plan.kind === "refused") return void this.#refuse(plan.error, true);
    if (plan.kind === "setting") return this.#querySetting(plan.name);
    const { statements } = plan;
    if (plan.kind === "write") return this.#onWriteQuery(statements, buffer, start, end);
    const funding = plan.free ? undefined : this.#metering.startStatement();
    if (!funding) return void this.#sendQuery(statements, false, false, buffer, start, end);
    return funding.then((refusal) => {
      if (refusal) this.#refuse(refusal, true);
      else this.#sendQuery(statements, false, false, buffer, start, end);
    });
  }

  /**
   * A simple query that writes. It waits until everything before it is answered (whether a transaction is open
   * decides how it runs: write-transactions.ts), is funded, and is sent; the client's next frames then wait until
   * its writes are paid for, or undone.
   */
  async #onWriteQuery(
    statements: readonly GuardedStatement[],
    buffer: Buffer,
    start: number,
    end: number,
  ): Promise<void> {
    if (this.#units.length > 0) await new Promise<void>((resolve) => (this.#onDrained = resolve));
    if (this.#ended || this.#closing) return;
    const plan = this.#policy.writePlan(statements, this.#status);
    if (typeof plan === "object") return this.#refuse(plan.refusal, true);
    const funding = this.#metering.startStatement();
    const refusal = funding && (await funding);
    if (refusal) return this.#refuse(refusal, true);
    if (plan === "wrap") {
      this.#units.push({ kind: "injected", role: "begin" });
      this.#toUpstream.push(BEGIN_QUERY);
    }
    this.#sendQuery(statements, true, plan === "wrap", buffer, start, end);
    return this.#awaitWrite();
  }

  // No closure on the per-statement path: each would cost an allocation (and, under tsx, a name).
  #sendQuery(
    statements: readonly GuardedStatement[],
    writes: boolean,
    wrapped: boolean,
    buffer: Buffer,
    start: number,
    end: number,
  ): void {
    this.#units.push({
      kind: "simple",
      statements,
      index: 0,
      started: performance.now(),
      writes,
      wrapped,
      failed: false,
    });
    this.#toUpstream.pushRange(buffer, start, end);
  }

  #onExecute(buffer: Buffer, start: number, end: number): Promise<void> | undefined {
    const { portal, maxRows } = decodeExecute(payloadOf(buffer, start, end));
    const prepared = this.#prepared.portal(portal);
    if (prepared?.setting !== undefined) {
      this.#units.push({ kind: "setting", name: prepared.setting });
      this.#toUpstream.pushRange(buffer, start, end);
      return;
    }
    const refusal = this.#policy.executeRefusal(prepared, maxRows);
    if (refusal) return void this.#refuse(refusal, false);
    const funding = this.#metering.startStatement();
    if (!funding) return this.#sendExecute(prepared, buffer, start, end);
    return funding.then((refused) =>
      refused ? this.#refuse(refused, false) : this.#sendExecute(prepared, buffer, start, end),
    );
  }

  /** Sends an Execute; one of a write is followed by a Flush (its answers come only then) and waited for. */
  #sendExecute(
    prepared: PreparedStatement | undefined,
    buffer: Buffer,
    start: number,
    end: number,
  ): Promise<void> | undefined {
    const writes = prepared?.writes === true;
    this.#units.push({ kind: "execute", sql: prepared?.sql ?? "", started: performance.now(), writes });
    this.#toUpstream.pushRange(buffer, start, end);
    if (!writes) return;
    this.#toUpstream.push(FLUSH);
    return this.#awaitWrite();
  }

  /** Sends what is queued and holds the client's next frames until the last unit queued (a write) is done. */
  #awaitWrite(): Promise<void> {
    const unit = this.#units[this.#units.length - 1]!;
    this.#flushToUpstream();
    return new Promise<void>((resolve) => (this.#pendingWrite = { unit, resolve }));
  }

  /** Forwards a client frame once it is funded: nothing reaches the provider's database unfunded. */
  #forwardFunded(buffer: Buffer, start: number, end: number): Promise<void> | undefined {
    const funding = this.#metering.startStatement();
    if (!funding) return void this.#toUpstream.pushRange(buffer, start, end);
    return funding.then((refusal) => {
      if (refusal) this.#refuse(refusal, false);
      else this.#toUpstream.pushRange(buffer, start, end);
    });
  }

  /**
   * A simple-protocol `SHOW pgtoll.<name>`: answered by the proxy alone when nothing is upstream (the usual
   * case), else sent as its stand-in so that the answer keeps its place in the pipeline.
   */
  #querySetting(name: string): Promise<void> | undefined {
    if (this.#units.length > 0) {
      this.#units.push({ kind: "setting", name }, { kind: "sync" });
      this.#toUpstream.push(standInQuery(name));
      return;
    }
    return this.deps.settings.value(name).then(
      (value) => {
        this.#toClient.push(localShowAnswer(name, value, this.#status));
        this.#flushToClient();
        if (this.#status === "I") this.#becameIdle(performance.now());
      },
      (error: unknown) => {
        this.#settingUnavailable(error);
        this.#toClient.push(encodeReadyForQuery(this.#status));
        this.#flushToClient();
      },
    );
  }

  #settingUnavailable(error: unknown): void {
    this.deps.logger.warn({ err: error }, "could not read the balance for SHOW");
    this.#toClient.push(ledgerUnavailable());
  }

  /** Sends the upstream an unparsable stand-in and remembers to show the client `error` in its place. */
  #refuse(error: Buffer, simple: boolean): void {
    this.#units.push({ kind: "refused", error });
    if (simple) this.#units.push({ kind: "sync" });
    this.#toUpstream.push(simple ? refusedQuery : refusedParse);
  }

  // ---- upstream -> client -------------------------------------------------------------------------

  #flushToClient(): void {
    if (!this.#toClient.flushTo(this.deps.client) && this.#closing !== "gone") this.deps.upstream.pause();
  }

  /** Handles one upstream frame, `buffer[start, end)`; returns a promise when it has to wait for the ledger. */
  #handleUpstreamFrame(code: number, buffer: Buffer, start: number, end: number): Promise<void> | undefined {
    switch (code) {
      case BackendCode.DataRow:
        return this.#onRow(buffer, start, end);
      case BackendCode.CopyData:
        if (this.#copy?.isFraming(buffer, start, end)) {
          if (!this.#dropsRows()) this.#toClient.pushRange(buffer, start, end);
          return;
        }
        return this.#onRow(buffer, start, end);
      case BackendCode.CopyOutResponse:
        this.#copy = new CopyOut(this.#runningStatement()?.copyHeader === true, buffer, start);
        if (!this.#cutOff) this.#toClient.pushRange(buffer, start, end);
        return;
      case BackendCode.CommandComplete:
        return this.#onStatementEnd(buffer, start, end, writeCountOf(buffer, start, end));
      case BackendCode.PortalSuspended:
      case BackendCode.EmptyQueryResponse:
        return this.#onStatementEnd(buffer, start, end, null);
      case BackendCode.ErrorResponse:
        return this.#onError(buffer, start, end);
      case BackendCode.NoticeResponse:
        this.#onNotice(buffer, start, end);
        return;
      case BackendCode.ReadyForQuery:
        this.#onReady(buffer, start, end);
        return;
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
  #relayRows(frames: FrameBatch, at: number): boolean {
    if (this.#dropsRows()) return false;
    const count = frames.rows[at]!;
    const buffer = frames.buffers[at]!;
    const start = frames.starts[at]!;
    const end = frames.ends[at]!;
    const allowed = this.#metering.allowRows(count, end - start - count * FRAME_HEADER_LENGTH);
    if (allowed === 0) return false;
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
    return this.#cutOff || this.#closing === "gone" || this.#units[0]?.kind === "setting";
  }

  #onRow(buffer: Buffer, start: number, end: number): Promise<void> | undefined {
    if (this.#dropsRows()) return;
    const bytes = end - start - FRAME_HEADER_LENGTH;
    if (this.#metering.allowRows(1, bytes) === 1) return void this.#relayRow(buffer, start, end);
    return this.#metering
      .fundRow(bytes)
      .then((cutOff) => (cutOff ? this.#cutOffResult(cutOff) : this.#relayRow(buffer, start, end)));
  }

  #relayRow(buffer: Buffer, start: number, end: number): void {
    this.#tally.rowsRelayed++;
    this.#toClient.pushRange(buffer, start, end);
  }

  /** The statement the upstream is answering, when the relay knows it. */
  #runningStatement(): GuardedStatement | undefined {
    const head = this.#units[0];
    if (head?.kind === "simple") return head.statements[head.index];
    if (head?.kind !== "execute" || head.sql === "") return undefined;
    return this.#policy.statementOf(head.sql);
  }

  /**
   * The result ends before its last row (statement-metering.ts says why): the client gets the error in place of
   * the rest, which is cancelled. A write cut off in its RETURNING rows is not committed.
   */
  async #cutOffResult(reason: CutOffReason): Promise<void> {
    this.#cutOff = true;
    const head = this.#units[0];
    if (head?.kind === "simple" && head.writes) head.failed = true;
    const error = await this.#metering.cutOff(sqlOf(head), reason);
    this.#tally.cutOff++;
    this.#toClient.push(error);
    this.deps.cancelUpstream();
  }

  /** A statement's result is complete; `written` is the row count of a write's CommandComplete. */
  #onStatementEnd(
    buffer: Buffer,
    start: number,
    end: number,
    written: number | null,
  ): Promise<void> | undefined {
    const head = this.#units[0];
    // BEGIN, COMMIT or ROLLBACK the proxy sent: not the client's.
    if (head?.kind === "injected") return;
    this.#copy = undefined;
    if (this.#cutOff) {
      if (head?.kind === "execute") {
        this.#units.shift();
        // The cancel came too late and the write completed: it must not commit at the client's Sync.
        if (head.writes && written !== null) this.#abortExtendedWrite();
      }
      return;
    }
    if (head?.kind === "setting") return this.#endSetting(head.name);
    const sql = sqlOf(head);
    const last = head?.kind === "simple" && head.index === head.statements.length - 1;
    if (head?.kind === "simple") head.index++;
    else if (head?.kind === "execute") {
      this.#tally.upstreamLatency.observe((performance.now() - head.started) / 1000);
      this.#units.shift();
    }
    if (written !== null) return this.#endWrite(head, written, sql, buffer, start, end, last);
    const ended = this.#metering.endStatement(sql, buffer, start, sentAtOf(head));
    if (typeof ended === "string") return this.#cutOffResult(ended);
    this.#relayComplete(head, buffer, start, end, last);
    return ended;
  }

  /**
   * Relays a CommandComplete; the last one of a wrapped query is kept until its COMMIT succeeded, as PostgreSQL
   * commits a query's implicit transaction before it reports the query's last statement complete.
   */
  #relayComplete(head: Unit | undefined, buffer: Buffer, start: number, end: number, last: boolean): void {
    if (last && head?.kind === "simple" && head.wrapped) head.held = Buffer.from(buffer.subarray(start, end));
    else this.#toClient.pushRange(buffer, start, end);
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
  ): Promise<void> | undefined {
    if (this.#closing === "gone") return void this.#metering.failStatement(sql);
    const paid = this.#metering.endWrite(written, sql, sentAtOf(head));
    if (paid === true) return void this.#relayComplete(head, buffer, start, end, last);
    if (Buffer.isBuffer(paid)) return void this.#failWrite(head, paid);
    return paid.then((verdict) =>
      verdict === true ? this.#relayComplete(head, buffer, start, end, last) : this.#failWrite(head, verdict),
    );
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
    this.#units.push(error ? { kind: "refused", error } : { kind: "refused" });
    this.#toUpstream.push(refusedParse);
    this.#flushToUpstream();
  }

  /** The stand-in of `SHOW pgtoll.<name>` completed upstream: the client gets the value instead. */
  #endSetting(name: string): Promise<void> {
    this.#units.shift();
    return this.deps.settings.value(name).then(
      (value) => void this.#toClient.push(showResult(value)),
      (error: unknown) => this.#settingUnavailable(error),
    );
  }

  /**
   * An ErrorResponse. The proxy's own stand-ins' errors are replaced or swallowed; the database's reaches the
   * client as the metering has it (charged, or its text withheld) and ends the statement.
   */
  #onError(buffer: Buffer, start: number, end: number): Promise<void> | undefined {
    const head = this.#units[0];
    if (head?.kind === "refused") {
      this.#units.shift();
      if (head.error) this.#toClient.push(head.error);
      dropUntilSync(this.#units);
      return;
    }
    if (head?.kind === "injected") {
      // A COMMIT that failed (a deferred constraint) tells the client why; an abort's stand-in fails on purpose.
      if (head.role === "end") head.error = this.#metering.commitErrorOf(buffer, start, end);
      return;
    }
    if (this.#cutOff || this.#closing === "gone") {
      if (head?.kind === "execute") this.#units.shift();
      dropUntilSync(this.#units);
      return;
    }
    const error = this.#metering.errorOf(buffer, start, end);
    if (Buffer.isBuffer(error)) return void this.#relayError(head, error);
    return error.then((relayed) => this.#relayError(head, relayed));
  }

  /** Ends the failed statement (its rows and the error's row charged) and relays `error`. */
  #relayError(head: Unit | undefined, error: Buffer): void {
    if (isFatalError(error)) this.#fatalRelayed = true;
    this.#metering.failStatement(sqlOf(head));
    if (head?.kind === "execute") this.#units.shift();
    dropUntilSync(this.#units);
    this.#toClient.push(error);
  }

  /** A NoticeResponse; those answering the proxy's own statements, or dropped answers, are dropped. */
  #onNotice(buffer: Buffer, start: number, end: number): void {
    const head = this.#units[0];
    if (this.#cutOff || this.#closing === "gone" || head?.kind === "injected" || head?.kind === "refused")
      return;
    const notice = this.#metering.noticeOf(buffer, start, end, head !== undefined);
    if (notice) this.#toClient.push(notice);
  }

  #onReady(buffer: Buffer, start: number, end: number): void {
    const now = performance.now();
    const status = readyForQueryStatusOf(buffer, start, end);
    const head = this.#units[0];
    if (head?.kind === "injected") {
      this.#units.shift();
      this.#endInjected(head, status, buffer, start, end, now);
      return;
    }
    // ReadyForQuery closes the oldest simple query or Sync-terminated batch.
    let closed: SimpleUnit | undefined;
    while (this.#units.length > 0) {
      const unit = this.#units.shift()!;
      if (unit.kind === "simple") {
        this.#tally.upstreamLatency.observe((now - unit.started) / 1000);
        closed = unit;
        break;
      }
      if (unit.kind === "sync") break;
    }
    this.#status = status;
    this.#cutOff = false;
    if (closed?.writes && !this.#closing) {
      // The writes are paid for (or failed): the proxy ends its own transaction, or aborts the client's.
      if (closed.wrapped) {
        const failed = closed.failed || status === "E";
        this.#inject(
          { kind: "injected", role: "end", held: closed.held },
          failed ? ROLLBACK_QUERY : COMMIT_QUERY,
        );
        return;
      }
      if (closed.failed && status === "T") {
        this.#inject({ kind: "injected", role: "abort" }, refusedQuery);
        return;
      }
    }
    this.#toClient.pushRange(buffer, start, end);
    if (status === "I" && this.#units.length === 0) this.#becameIdle(now);
  }

  /** Sends a statement of the proxy's own that the write the client waits for now depends on. */
  #inject(unit: InjectedUnit, query: Buffer): void {
    this.#units.push(unit);
    if (this.#pendingWrite) this.#pendingWrite.unit = unit;
    this.#toUpstream.push(query);
    this.#flushToUpstream();
  }

  /** The proxy's own statement is answered: the client gets the held tag or the COMMIT's error, then its status. */
  #endInjected(
    unit: InjectedUnit,
    status: TransactionStatus,
    buffer: Buffer,
    start: number,
    end: number,
    now: number,
  ): void {
    if (unit.role === "begin") return;
    if (unit.error) this.#toClient.push(unit.error);
    else if (unit.held) this.#toClient.push(unit.held);
    this.#status = status;
    this.#toClient.pushRange(buffer, start, end);
    if (status === "I" && this.#units.length === 0) this.#becameIdle(now);
  }

  #becameIdle(now: number): void {
    if (this.#farewell && !this.#closing) {
      this.#sayFarewell();
      return;
    }
    this.#idleSince = now;
    this.#idleTimer ??= this.#armIdleTimer(this.deps.idleReleaseMs);
  }

  #armIdleTimer(delayMs: number): NodeJS.Timeout {
    const timer = setTimeout(this.#onIdleTimer, delayMs);
    timer.unref();
    return timer;
  }

  /** Gives the reservation back once the session has been idle for `idleReleaseMs` (else waits the rest). */
  readonly #onIdleTimer = (): void => {
    this.#idleTimer = undefined;
    if (this.#ended || this.#idleSince === undefined || this.#units.length > 0) return;
    const idleMs = performance.now() - this.#idleSince;
    if (idleMs < this.deps.idleReleaseMs) {
      this.#idleTimer = this.#armIdleTimer(this.deps.idleReleaseMs - idleMs);
      return;
    }
    this.#metering
      .release()
      .catch((error: unknown) => this.deps.logger.warn({ err: error }, "idle release failed"));
  };

  #internalFailure(error: unknown): void {
    this.deps.logger.error({ err: error }, "proxy session failed");
    if (!this.deps.client.destroyed) {
      this.deps.client.write(
        errorFrame(
          SqlState.connectionFailure,
          "pgtoll could not record this session's charges; the session is closed",
          { fatal: true },
        ),
      );
    }
    this.end("internal failure");
  }
}

/** The body of the frame `buffer[start, end)`, after its type byte and length word. */
function payloadOf(buffer: Buffer, start: number, end: number): Buffer {
  return buffer.subarray(start + FRAME_HEADER_LENGTH, end);
}
