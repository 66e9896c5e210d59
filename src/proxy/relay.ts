import type { Socket } from "node:net";
import { performance } from "node:perf_hooks";
import type { Logger } from "pino";
import { isLedgerUnavailable } from "../billing/ledger-availability.js";
import type { GuardedStatement, GuardVerdict } from "../guard/index.js";
import { readyForQueryStatusOf, type TransactionStatus, writeCountOf } from "./backend-messages.js";
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
import { refusedParse, refusedQuery } from "./injected-errors.js";
import { BackendCode, FrontendCode } from "./message-codes.js";
import { OutputBatch } from "./output-batch.js";
import {
  isPgtollSetting,
  localShowAnswer,
  pgtollSettingValue,
  showResult,
  standInParse,
  standInQuery,
  unknownSettingError,
} from "./pgtoll-settings.js";
import { errorFrame, SqlState } from "./proxy-errors.js";
import type { ProxyMetrics, ProxyTally } from "./proxy-metrics.js";
import { encodeReadyForQuery, encodeTerminate } from "./serializer.js";
import type { SessionMeter } from "./session-meter.js";

/** What the relay expects the upstream to answer next, in order. */
type Unit =
  | { kind: "simple"; statements: readonly GuardedStatement[]; index: number; started: number }
  | { kind: "execute"; sql: string; started: number }
  | { kind: "refused"; error: Buffer }
  /** A `SHOW pgtoll.<name>` sent upstream as its stand-in: its row and tag are replaced by the value. */
  | { kind: "setting"; name: string }
  | { kind: "sync" };

/** Commands whose CommandComplete count is the number of rows written (they are not free). */
const WRITE_COMMANDS = new Set(["INSERT", "UPDATE", "DELETE", "MERGE"]);

export interface RelayDeps {
  client: Socket;
  upstream: Socket;
  meter: SessionMeter;
  /** The provider's wallet, for `SHOW pgtoll.deposit_address`. */
  depositAddress: string;
  metrics: ProxyMetrics;
  logger: Logger;
  /** The guard, memoised by SQL text. */
  check(sql: string): GuardVerdict;
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
 * The ready phase of a proxied session: every client message is guarded before it is forwarded, every upstream
 * answer is relayed while the agent's reservation pays for it, and every statement is charged when it completes.
 * Both directions are processed frame by frame in order; a pass that needs the ledger (to grow the
 * reservation) pauses its socket until the answer is in, so order is never lost and memory stays bounded.
 * Frames are handled as positions in the received chunks and relayed as ranges of them: a relayed message
 * costs no allocation.
 */
export class Relay {
  readonly #units: Unit[] = [];
  readonly #statements = new Map<string, string>();
  readonly #portals = new Map<string, string>();
  /** Prepared statements and portals that are a `SHOW pgtoll.<name>`, by name: the setting's name. */
  readonly #settingStatements = new Map<string, string>();
  readonly #settingPortals = new Map<string, string>();
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
  #status: TransactionStatus;
  /** Set when a result was cut off for lack of funds: upstream answers are dropped until ReadyForQuery. */
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

  constructor(private readonly deps: RelayDeps) {
    this.#status = deps.status;
    this.#tally = deps.metrics.tally;
  }

  get status(): TransactionStatus {
    return this.#status;
  }

  /** True once the client sent Terminate or went away; the upstream closing is then expected. */
  get closing(): boolean {
    return this.#closing !== undefined;
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

  /** The client's socket closed: what it left upstream is cancelled and settled, then the session ends. */
  clientGone(): void {
    this.#close("gone", "client closed");
  }

  /**
   * Ends the client's side of the session. With nothing upstream the session ends now; otherwise the
   * upstream gets Terminate after what was forwarded and is read to its end, so that a write that ran is
   * charged (writes are not free) and rows handed to the client are charged, bounded by `drainTimeoutMs`.
   */
  #close(how: "terminated" | "gone", reason: string): void {
    if (this.#ended || this.#closing === "gone") return;
    if (this.#units.length === 0 && !this.#upstream.busy) {
      this.end(reason);
      return;
    }
    if (how === "gone" && !this.#units.some((unit) => this.#mayWrite(unit))) {
      // Only reads are left: charge the rows already handed over and drop the upstream, rather than read (and
      // parse) the rest of a result that may fill megabytes of socket buffers. The cancel stops a statement
      // that sends nothing for a while (the server would notice the closed socket only when it next writes).
      this.deps.cancelUpstream();
      const head = this.#units[0];
      const rows = this.deps.meter.statementRows;
      if (rows > 0) void this.deps.meter.endStatement(rows, sqlOf(head), "failed");
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

  /** Whether a unit still upstream may be a write, whose affected rows are charged when it completes. */
  #mayWrite(unit: Unit): boolean {
    const mayWrite = (statement: GuardedStatement) => isWrite(statement) || statement.command === "EXECUTE";
    if (unit.kind === "simple") return unit.statements.slice(unit.index).some(mayWrite);
    if (unit.kind !== "execute" || unit.sql === "") return false;
    const verdict = this.deps.check(unit.sql);
    return verdict.kind !== "allow" || verdict.statements.some(mayWrite);
  }

  /** Stops relaying; the session closes both sockets. Idempotent. */
  end(reason: string): void {
    if (this.#ended) return;
    this.#ended = true;
    // Rows of a statement the upstream never finished (it closed, or broke the protocol) reached the client.
    const rows = this.deps.meter.statementRows;
    if (rows > 0 && !this.#cutOff) void this.deps.meter.endStatement(rows, sqlOf(this.#units[0]), "failed");
    clearTimeout(this.#idleTimer);
    clearTimeout(this.#drainTimer);
    this.#client.frames.clear();
    this.#upstream.frames.clear();
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
      else this.#flushToClient();
    } catch (error) {
      this.#protocolFailure(direction.side, error as Error);
    }
    direction.busy = false;
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
        const parse = decodeParse(payloadOf(buffer, start, end));
        const verdict = this.deps.check(parse.sql);
        this.#tally.verdicts[verdict.kind]++;
        if (verdict.kind !== "allow") {
          this.#statements.delete(parse.name);
          this.#refuse(refusalFor(verdict), false);
          return;
        }
        this.#statements.set(parse.name, parse.sql);
        if (this.#settingStatements.size > 0) this.#settingStatements.delete(parse.name);
        const setting = settingOf(verdict.statements);
        if (setting !== undefined)
          return void this.#parseSetting(parse.name, setting, verdict.statements.length);
        this.#toUpstream.pushRange(buffer, start, end);
        return;
      }
      case FrontendCode.Bind: {
        const bind = decodeBindTarget(payloadOf(buffer, start, end));
        this.#portals.set(bind.portal, this.#statements.get(bind.statement) ?? "");
        if (this.#settingStatements.size > 0 || this.#settingPortals.size > 0) {
          const setting = this.#settingStatements.get(bind.statement);
          if (setting === undefined) this.#settingPortals.delete(bind.portal);
          else this.#settingPortals.set(bind.portal, setting);
        }
        this.#toUpstream.pushRange(buffer, start, end);
        return;
      }
      case FrontendCode.Execute: {
        const { portal } = decodeExecute(payloadOf(buffer, start, end));
        const setting = this.#settingPortals.size > 0 ? this.#settingPortals.get(portal) : undefined;
        if (setting !== undefined) {
          this.#units.push({ kind: "setting", name: setting });
          this.#toUpstream.pushRange(buffer, start, end);
          return;
        }
        if (this.deps.meter.canStart) return void this.#forwardExecute(portal, buffer, start, end);
        return this.deps.meter.topUp(1).then(
          (ok) => {
            if (ok) this.#forwardExecute(portal, buffer, start, end);
            else this.#refuse(insufficientFunds(0), false);
          },
          (error: unknown) => this.#refuseWithoutLedger(error, false),
        );
      }
      case FrontendCode.Sync:
        this.#units.push({ kind: "sync" });
        this.#toUpstream.pushRange(buffer, start, end);
        return;
      case FrontendCode.Close: {
        const target = decodeClose(payloadOf(buffer, start, end));
        if (target.kind === "S") {
          this.#statements.delete(target.name);
          this.#settingStatements.delete(target.name);
        } else {
          this.#portals.delete(target.name);
          this.#settingPortals.delete(target.name);
        }
        this.#toUpstream.pushRange(buffer, start, end);
        return;
      }
      case FrontendCode.FunctionCall:
        this.#refuse(
          errorFrame(
            SqlState.featureNotSupported,
            "the FunctionCall message is not supported by pgtoll; call the function in a query",
          ),
          true,
        );
        return;
      case FrontendCode.Terminate:
        this.#close("terminated", "client terminated");
        return;
      default:
        // Describe, Flush, CopyData/CopyDone/CopyFail and the rest pass through; the upstream judges them.
        this.#toUpstream.pushRange(buffer, start, end);
        return;
    }
  }

  #onQuery(buffer: Buffer, start: number, end: number): Promise<void> | undefined {
    const { sql } = decodeQuery(payloadOf(buffer, start, end));
    const verdict = this.deps.check(sql);
    this.#tally.verdicts[verdict.kind]++;
    if (verdict.kind !== "allow") {
      this.#refuse(refusalFor(verdict), true);
      return;
    }
    const { statements } = verdict;
    const setting = settingOf(statements);
    if (setting !== undefined) return this.#querySetting(setting, statements.length);
    if (this.deps.meter.canStart || statements.every((s) => !s.returnsRows && !isWrite(s)))
      return void this.#forwardQuery(statements, buffer, start, end);
    return this.deps.meter.topUp(1).then(
      (ok) => {
        if (ok) this.#forwardQuery(statements, buffer, start, end);
        else this.#refuse(insufficientFunds(0), true);
      },
      (error: unknown) => this.#refuseWithoutLedger(error, true),
    );
  }

  // No closure on the per-statement path: each would cost an allocation (and, under tsx, a name).
  #forwardQuery(statements: readonly GuardedStatement[], buffer: Buffer, start: number, end: number): void {
    this.#units.push({ kind: "simple", statements, index: 0, started: performance.now() });
    this.#toUpstream.pushRange(buffer, start, end);
  }

  #forwardExecute(portal: string, buffer: Buffer, start: number, end: number): void {
    this.#units.push({ kind: "execute", sql: this.#portals.get(portal) ?? "", started: performance.now() });
    this.#toUpstream.pushRange(buffer, start, end);
  }

  /**
   * A simple-protocol `SHOW pgtoll.<name>`: answered by the proxy alone when nothing is upstream (the usual
   * case), else sent as its stand-in so that the answer keeps its place in the pipeline.
   */
  #querySetting(name: string, statementCount: number): Promise<void> | undefined {
    const refusal = settingRefusal(name, statementCount);
    if (refusal) return void this.#refuse(refusal, true);
    if (this.#units.length > 0) {
      this.#units.push({ kind: "setting", name }, { kind: "sync" });
      this.#toUpstream.push(standInQuery(name));
      return;
    }
    return pgtollSettingValue(name, this.deps).then(
      (value) => {
        this.#toClient.push(localShowAnswer(name, value, this.#status));
        this.#flushToClient();
        if (this.#status === "I") this.#becameIdle(performance.now());
      },
      (error: unknown) => {
        this.deps.logger.warn({ err: error }, "could not read the balance for SHOW");
        this.#toClient.push(ledgerUnavailable());
        this.#toClient.push(encodeReadyForQuery(this.#status));
        this.#flushToClient();
      },
    );
  }

  /** An extended-protocol `SHOW pgtoll.<name>`: its stand-in is prepared under the client's statement name. */
  #parseSetting(statementName: string, name: string, statementCount: number): void {
    const refusal = settingRefusal(name, statementCount);
    if (refusal) {
      this.#statements.delete(statementName);
      this.#refuse(refusal, false);
      return;
    }
    this.#settingStatements.set(statementName, name);
    this.#toUpstream.push(standInParse(statementName, name));
  }

  /**
   * The ledger could not be reached to fund a statement: it is refused (not run), and the session stays usable
   * for when the ledger is back. Any other failure is the session's end.
   */
  #refuseWithoutLedger(error: unknown, simple: boolean): void {
    if (!isLedgerUnavailable(error)) throw error;
    this.deps.logger.warn({ err: error }, "the ledger is unavailable: statement refused");
    this.#refuse(ledgerUnavailable(), simple);
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
      case BackendCode.CopyData:
        return this.#onRow(buffer, start, end);
      case BackendCode.CommandComplete:
        return this.#onStatementEnd(buffer, start, end, writeCountOf(buffer, start, end));
      case BackendCode.PortalSuspended:
      case BackendCode.EmptyQueryResponse:
        return this.#onStatementEnd(buffer, start, end, null);
      case BackendCode.ErrorResponse:
        this.#onError(buffer, start, end);
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
   * Relays the DataRows of entry `at` (a run, or one) as far as the reservation pays for them, as one range: a
   * large result costs a few operations per chunk instead of per row. True when it relayed them all. Otherwise the entry is left with the rows not relayed, for the row-by-row path (a top-up,
   * a cut-off, or rows that are dropped).
   */
  #relayRows(frames: FrameBatch, at: number): boolean {
    if (this.#dropsRows()) return false;
    const count = frames.rows[at]!;
    const allowed = this.deps.meter.allowRows(count);
    if (allowed === 0) return false;
    this.#tally.rowsRelayed += allowed;
    const buffer = frames.buffers[at]!;
    const start = frames.starts[at]!;
    if (allowed === count) {
      this.#toClient.pushRange(buffer, start, frames.ends[at]!);
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
    if (this.deps.meter.allowRow()) {
      this.#tally.rowsRelayed++;
      this.#toClient.pushRange(buffer, start, end);
      return;
    }
    return this.deps.meter.topUp(1).then(
      (ok) => {
        if (ok && this.deps.meter.allowRow()) {
          this.#tally.rowsRelayed++;
          this.#toClient.pushRange(buffer, start, end);
        } else {
          return this.#cutOffResult();
        }
      },
      (error: unknown) => {
        if (!isLedgerUnavailable(error)) throw error;
        this.deps.logger.warn({ err: error }, "the ledger is unavailable: result cut off");
        return this.#cutOffResult(ledgerUnavailable(this.deps.meter.statementRows));
      },
    );
  }

  /**
   * The balance ran out mid-result (or the ledger could not be reached to fund more): charge what was delivered,
   * tell the client, cancel the rest.
   */
  async #cutOffResult(error?: Buffer): Promise<void> {
    this.#cutOff = true;
    const head = this.#units[0];
    const delivered = this.deps.meter.statementRows;
    await this.deps.meter.endStatement(delivered, sqlOf(head), "cutOff");
    this.#tally.cutOff++;
    this.#toClient.push(error ?? insufficientFunds(delivered));
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
    if (this.#cutOff) {
      if (head?.kind === "execute") this.#units.shift();
      return;
    }
    if (head?.kind === "setting") return this.#endSetting(head.name);
    const counted = this.deps.meter.statementRows;
    const rows = written !== null ? Math.max(written, counted) : counted;
    const sql = sqlOf(head);
    if (head?.kind === "simple") head.index++;
    else if (head?.kind === "execute") {
      this.#tally.upstreamLatency.observe((performance.now() - head.started) / 1000);
      this.#units.shift();
    }
    const costly = this.deps.meter.endStatement(rows, sql);
    this.#toClient.pushRange(buffer, start, end);
    // The charge is queued (group commit); only a write that outgrew the reservation waits for the ledger.
    return costly?.then((result) => {
      if (result.unpaidMicro > 0n) this.deps.metrics.unpaidMicro.inc(Number(result.unpaidMicro));
    });
  }

  /** The stand-in of `SHOW pgtoll.<name>` completed upstream: the client gets the value instead. */
  #endSetting(name: string): Promise<void> {
    this.#units.shift();
    return pgtollSettingValue(name, this.deps).then(
      (value) => void this.#toClient.push(showResult(value)),
      (error: unknown) => {
        this.deps.logger.warn({ err: error }, "could not read the balance for SHOW");
        this.#toClient.push(ledgerUnavailable());
      },
    );
  }

  #onError(buffer: Buffer, start: number, end: number): void {
    const head = this.#units[0];
    if (head?.kind === "refused") {
      this.#units.shift();
      this.#toClient.push(head.error);
      this.#dropUntilSync();
      return;
    }
    if (this.#cutOff) {
      if (head?.kind === "execute") this.#units.shift();
      this.#dropUntilSync();
      return;
    }
    if (head?.kind === "simple" || head?.kind === "execute") {
      const rows = this.deps.meter.statementRows;
      if (rows > 0) void this.deps.meter.endStatement(rows, sqlOf(head), "failed");
      if (head.kind === "execute") this.#units.shift();
    }
    this.#dropUntilSync();
    this.#toClient.pushRange(buffer, start, end);
  }

  /** After an error the upstream skips the rest of the batch up to Sync: so do our expectations. */
  #dropUntilSync(): void {
    while (this.#units.length > 0 && this.#units[0]!.kind !== "sync" && this.#units[0]!.kind !== "simple")
      this.#units.shift();
  }

  #onReady(buffer: Buffer, start: number, end: number): void {
    const now = performance.now();
    // ReadyForQuery closes the oldest simple query or Sync-terminated batch.
    while (this.#units.length > 0) {
      const head = this.#units.shift()!;
      if (head.kind === "simple") this.#tally.upstreamLatency.observe((now - head.started) / 1000);
      if (head.kind === "simple" || head.kind === "sync") break;
    }
    this.#status = readyForQueryStatusOf(buffer, start, end);
    this.#cutOff = false;
    this.#toClient.pushRange(buffer, start, end);
    if (this.#status === "I" && this.#units.length === 0) this.#becameIdle(now);
  }

  #becameIdle(now: number): void {
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
    this.deps.meter
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

function isWrite(statement: GuardedStatement): boolean {
  return WRITE_COMMANDS.has(statement.command);
}

function sqlOf(unit: Unit | undefined): string {
  if (!unit) return "";
  if (unit.kind === "simple")
    return unit.statements[Math.min(unit.index, unit.statements.length - 1)]?.sql ?? "";
  if (unit.kind === "execute") return unit.sql;
  return "";
}

/** The pgtoll setting a query shows, if any of its statements is `SHOW pgtoll.<name>`. */
function settingOf(statements: readonly GuardedStatement[]): string | undefined {
  for (const statement of statements)
    if (statement.pgtollSetting !== undefined) return statement.pgtollSetting;
  return undefined;
}

/** Why a `SHOW pgtoll.<name>` cannot be answered: an unknown name, or other statements in the same query. */
function settingRefusal(name: string, statementCount: number): Buffer | undefined {
  if (!isPgtollSetting(name)) return unknownSettingError(name);
  if (statementCount > 1)
    return errorFrame(SqlState.featureNotSupported, `SHOW ${name} must be sent as a query of its own`);
  return undefined;
}

/** The ledger could not be reached: nothing was run (or, mid-result, the rows delivered were charged). */
function ledgerUnavailable(rowsDelivered?: number): Buffer {
  return errorFrame(
    SqlState.cannotConnectNow,
    rowsDelivered === undefined
      ? "the pgtoll ledger is unavailable, so the statement was not run; try again shortly"
      : `the pgtoll ledger is unavailable: the result was cut off after ${rowsDelivered} rows, which were charged; try again shortly`,
  );
}

function refusalFor(verdict: Exclude<GuardVerdict, { kind: "allow" }>): Buffer {
  if (verdict.kind === "deny") {
    return errorFrame(
      SqlState.insufficientPrivilege,
      `pgtoll policy: statement not allowed (${verdict.rule}): ${verdict.message}`,
    );
  }
  return errorFrame(SqlState.syntaxError, `pgtoll policy: invalid SQL: ${verdict.message}`);
}

function insufficientFunds(rowsDelivered: number): Buffer {
  return errorFrame(
    SqlState.insufficientFunds,
    rowsDelivered > 0
      ? `insufficient balance: the result was cut off after ${rowsDelivered} rows, which were charged`
      : "insufficient balance: deposit funds with this provider to run statements",
    {
      hint: "POST /api/topup pays a top-up with x402 from the agent's wallet in one request (where the gateway offers x402); POST /api/deposit credits a USDC transfer to the provider's wallet",
    },
  );
}
