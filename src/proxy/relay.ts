import type { Socket } from "node:net";
import { performance } from "node:perf_hooks";
import type { Logger } from "pino";
import type { GuardedStatement, GuardVerdict } from "../guard/index.js";
import { decodeCommandComplete, decodeReadyForQuery, type TransactionStatus } from "./backend-messages.js";
import { FRONTEND_MAX_FRAME_LENGTH, type Frame, FrameReader } from "./frame-reader.js";
import { decodeBind, decodeClose, decodeExecute, decodeParse, decodeQuery } from "./frontend-messages.js";
import { refusedParse, refusedQuery } from "./injected-errors.js";
import { BackendCode, FrontendCode } from "./message-codes.js";
import { OutputBatch } from "./output-batch.js";
import { errorFrame, SqlState } from "./proxy-errors.js";
import type { ProxyMetrics } from "./proxy-metrics.js";
import { encodeTerminate } from "./serializer.js";
import type { SessionMeter } from "./session-meter.js";

/** What the relay expects the upstream to answer next, in order. */
type Unit =
  | { kind: "simple"; statements: readonly GuardedStatement[]; index: number; started: number }
  | { kind: "execute"; sql: string; started: number }
  | { kind: "refused"; error: Buffer }
  | { kind: "sync" };

/** Commands whose CommandComplete count is the number of rows written (they are not free). */
const WRITE_COMMANDS = new Set(["INSERT", "UPDATE", "DELETE", "MERGE"]);

export interface RelayDeps {
  client: Socket;
  upstream: Socket;
  meter: SessionMeter;
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

/**
 * The ready phase of a proxied session: every client message is guarded before it is forwarded, every upstream
 * answer is relayed while the agent's reservation pays for it, and every statement is charged when it completes.
 * Both directions are processed frame by frame in order; a pass that needs the ledger (to grow the
 * reservation) pauses its socket until the answer is in, so order is never lost and memory stays bounded.
 */
export class Relay {
  readonly #units: Unit[] = [];
  readonly #statements = new Map<string, string>();
  readonly #portals = new Map<string, string>();
  readonly #fromClient = new FrameReader({ maxFrameLength: FRONTEND_MAX_FRAME_LENGTH });
  readonly #fromUpstream = new FrameReader();
  readonly #clientFrames: Frame[] = [];
  readonly #upstreamFrames: Frame[] = [];
  readonly #toClient = new OutputBatch();
  readonly #toUpstream = new OutputBatch();
  #clientBusy = false;
  #upstreamBusy = false;
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
  #rowsRelayed = 0;
  #idleTimer: NodeJS.Timeout | undefined;

  /** Labelled counters looked up once per session, not once per statement or chunk. */
  readonly #counters;

  constructor(private readonly deps: RelayDeps) {
    this.#status = deps.status;
    const { statements, bytesRelayed } = deps.metrics;
    this.#counters = {
      verdict: {
        allow: statements.labels("allow"),
        deny: statements.labels("deny"),
        invalid: statements.labels("invalid"),
      } as Record<GuardVerdict["kind"], { inc(): void }>,
      cutOff: statements.labels("cut_off"),
      fromClient: bytesRelayed.labels("client_to_upstream"),
      fromUpstream: bytesRelayed.labels("upstream_to_client"),
    };
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
    this.#clientFrames.push(...early);
    client.on("data", (chunk: Buffer) =>
      this.#receive(chunk, this.#fromClient, this.#clientFrames, () => this.#pumpClient()),
    );
    upstream.on("data", (chunk: Buffer) =>
      this.#receive(chunk, this.#fromUpstream, this.#upstreamFrames, () => this.#pumpUpstream()),
    );
    // A pass waiting for the ledger keeps its socket paused: resuming it early would queue a whole result.
    client.on("drain", () => {
      if (!this.#upstreamBusy) upstream.resume();
    });
    upstream.on("drain", () => {
      if (!this.#clientBusy) client.resume();
    });
    upstream.resume();
    client.resume();
    if (early.length > 0) this.#pumpClient();
  }

  #receive(chunk: Buffer, reader: FrameReader, queue: Frame[], pump: () => void): void {
    if (this.#ended || (this.#closing && reader === this.#fromClient)) return;
    if (this.#idleTimer && reader === this.#fromClient) {
      clearTimeout(this.#idleTimer);
      this.#idleTimer = undefined;
    }
    (reader === this.#fromClient ? this.#counters.fromClient : this.#counters.fromUpstream).inc(chunk.length);
    try {
      reader.feed(chunk, (frame) => queue.push(frame));
    } catch (error) {
      this.#protocolFailure(reader === this.#fromClient ? "client" : "upstream", error as Error);
      return;
    }
    pump();
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
    if (this.#units.length === 0 && !this.#upstreamBusy) {
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
      if (rows > 0) {
        void this.deps.meter.endStatement(rows, { sql: sqlOf(head), rowCount: rows, failed: true });
      }
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
    clearTimeout(this.#idleTimer);
    clearTimeout(this.#drainTimer);
    this.#flushRowsMetric();
    this.deps.onEnd(reason);
  }

  // ---- client -> upstream -------------------------------------------------------------------------

  #pumpClient(): void {
    if (this.#clientBusy) return;
    this.#clientBusy = true;
    try {
      while (this.#clientFrames.length > 0 && !this.#ended && !this.#closing) {
        const frame = this.#clientFrames[0]!;
        const waiting = this.#handleClientFrame(frame);
        if (waiting) {
          this.deps.client.pause();
          this.#flushToUpstream();
          waiting.then(
            () => {
              this.#clientFrames.shift();
              this.#clientBusy = false;
              if (this.#closing) return;
              if (!this.deps.upstream.writableNeedDrain) this.deps.client.resume();
              this.#pumpClient();
            },
            (error: unknown) => this.#internalFailure(error),
          );
          return;
        }
        this.#clientFrames.shift();
      }
      this.#flushToUpstream();
    } catch (error) {
      this.#protocolFailure("client", error as Error);
    }
    this.#clientBusy = false;
  }

  #flushToUpstream(): void {
    // Once closing, the upstream has had its Terminate: nothing may follow it.
    if (this.#closing) return;
    if (!this.#toUpstream.flushTo(this.deps.upstream)) this.deps.client.pause();
  }

  /** Handles one client frame; returns a promise when it had to wait for the ledger. */
  #handleClientFrame(frame: Frame): Promise<void> | undefined {
    switch (frame.code) {
      case FrontendCode.Query:
        return this.#onQuery(frame);
      case FrontendCode.Parse: {
        const parse = decodeParse(frame.payload);
        const verdict = this.deps.check(parse.sql);
        this.#counters.verdict[verdict.kind].inc();
        if (verdict.kind !== "allow") {
          this.#statements.delete(parse.name);
          this.#refuse(refusalFor(verdict), false);
          return;
        }
        this.#statements.set(parse.name, parse.sql);
        this.#toUpstream.push(frame.frame);
        return;
      }
      case FrontendCode.Bind: {
        const bind = decodeBind(frame.payload);
        this.#portals.set(bind.portal, this.#statements.get(bind.statement) ?? "");
        this.#toUpstream.push(frame.frame);
        return;
      }
      case FrontendCode.Execute: {
        const { portal } = decodeExecute(frame.payload);
        const forward = () => {
          this.#units.push({
            kind: "execute",
            sql: this.#portals.get(portal) ?? "",
            started: performance.now(),
          });
          this.#toUpstream.push(frame.frame);
        };
        if (this.deps.meter.canStart) return void forward();
        return this.deps.meter.topUp(1).then((ok) => {
          if (ok) forward();
          else this.#refuse(insufficientFunds(0), false);
        });
      }
      case FrontendCode.Sync:
        this.#units.push({ kind: "sync" });
        this.#toUpstream.push(frame.frame);
        return;
      case FrontendCode.Close: {
        const target = decodeClose(frame.payload);
        if (target.kind === "S") this.#statements.delete(target.name);
        else this.#portals.delete(target.name);
        this.#toUpstream.push(frame.frame);
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
        this.#toUpstream.push(frame.frame);
        return;
    }
  }

  #onQuery(frame: Frame): Promise<void> | undefined {
    const { sql } = decodeQuery(frame.payload);
    const verdict = this.deps.check(sql);
    this.#counters.verdict[verdict.kind].inc();
    if (verdict.kind !== "allow") {
      this.#refuse(refusalFor(verdict), true);
      return;
    }
    const forward = () => {
      this.#units.push({
        kind: "simple",
        statements: verdict.statements,
        index: 0,
        started: performance.now(),
      });
      this.#toUpstream.push(frame.frame);
    };
    if (this.deps.meter.canStart || verdict.statements.every((s) => !s.returnsRows && !isWrite(s)))
      return void forward();
    return this.deps.meter.topUp(1).then((ok) => {
      if (ok) forward();
      else this.#refuse(insufficientFunds(0), true);
    });
  }

  /** Sends the upstream an unparsable stand-in and remembers to show the client `error` in its place. */
  #refuse(error: Buffer, simple: boolean): void {
    this.#units.push({ kind: "refused", error });
    if (simple) this.#units.push({ kind: "sync" });
    this.#toUpstream.push(simple ? refusedQuery : refusedParse);
  }

  // ---- upstream -> client -------------------------------------------------------------------------

  #pumpUpstream(): void {
    if (this.#upstreamBusy) return;
    this.#upstreamBusy = true;
    try {
      while (this.#upstreamFrames.length > 0 && !this.#ended) {
        const waiting = this.#handleUpstreamFrame(this.#upstreamFrames[0]!);
        if (waiting) {
          this.deps.upstream.pause();
          this.#flushToClient();
          waiting.then(
            () => {
              this.#upstreamFrames.shift();
              this.#upstreamBusy = false;
              // A slow client keeps the upstream paused: its 'drain' resumes it, not the ledger's answer.
              const clientWaiting = this.#closing !== "gone" && this.deps.client.writableNeedDrain;
              if (!clientWaiting) this.deps.upstream.resume();
              this.#pumpUpstream();
            },
            (error: unknown) => this.#internalFailure(error),
          );
          return;
        }
        this.#upstreamFrames.shift();
      }
      this.#flushToClient();
    } catch (error) {
      this.#protocolFailure("upstream", error as Error);
    }
    this.#upstreamBusy = false;
  }

  #flushToClient(): void {
    if (!this.#toClient.flushTo(this.deps.client) && this.#closing !== "gone") this.deps.upstream.pause();
    this.#flushRowsMetric();
  }

  #flushRowsMetric(): void {
    if (this.#rowsRelayed > 0) {
      this.deps.metrics.rowsRelayed.inc(this.#rowsRelayed);
      this.#rowsRelayed = 0;
    }
  }

  #handleUpstreamFrame(frame: Frame): Promise<void> | undefined {
    switch (frame.code) {
      case BackendCode.DataRow:
      case BackendCode.CopyData:
        return this.#onRow(frame);
      case BackendCode.CommandComplete:
        return this.#onStatementEnd(frame, decodeCommandComplete(frame.payload));
      case BackendCode.PortalSuspended:
      case BackendCode.EmptyQueryResponse:
        return this.#onStatementEnd(frame, null);
      case BackendCode.ErrorResponse:
        this.#onError(frame);
        return;
      case BackendCode.ReadyForQuery:
        this.#onReady(frame);
        return;
      default:
        if (!this.#cutOff) this.#toClient.push(frame.frame);
        return;
    }
  }

  #onRow(frame: Frame): Promise<void> | undefined {
    // Rows for a client that is gone are neither delivered nor charged.
    if (this.#cutOff || this.#closing === "gone") return;
    if (this.deps.meter.allowRow()) {
      this.#rowsRelayed++;
      this.#toClient.push(frame.frame);
      return;
    }
    return this.deps.meter.topUp(1).then((ok) => {
      if (ok && this.deps.meter.allowRow()) {
        this.#rowsRelayed++;
        this.#toClient.push(frame.frame);
      } else {
        return this.#cutOffResult();
      }
    });
  }

  /** The balance ran out mid-result: charge what was delivered, tell the client, cancel the rest. */
  async #cutOffResult(): Promise<void> {
    this.#cutOff = true;
    const head = this.#units[0];
    const delivered = this.deps.meter.statementRows;
    await this.deps.meter.endStatement(delivered, { sql: sqlOf(head), rowCount: delivered, cutOff: true });
    this.#counters.cutOff.inc();
    this.#toClient.push(insufficientFunds(delivered));
    this.deps.cancelUpstream();
  }

  #onStatementEnd(
    frame: Frame,
    tag: { command: string; rows: number | null } | null,
  ): Promise<void> | undefined {
    const head = this.#units[0];
    if (this.#cutOff) {
      if (head?.kind === "execute") this.#units.shift();
      return;
    }
    const counted = this.deps.meter.statementRows;
    const rows =
      tag && tag.rows !== null && WRITE_COMMANDS.has(tag.command) ? Math.max(tag.rows, counted) : counted;
    const sql = sqlOf(head);
    if (head?.kind === "simple") head.index++;
    else if (head?.kind === "execute") {
      this.deps.metrics.upstreamLatency.observe((performance.now() - head.started) / 1000);
      this.#units.shift();
    }
    const costly = this.deps.meter.endStatement(rows, { sql, rowCount: rows });
    this.#toClient.push(frame.frame);
    // The charge is queued (group commit); only a write that outgrew the reservation waits for the ledger.
    return costly?.then((result) => {
      if (result.unpaidMicro > 0n) this.deps.metrics.unpaidMicro.inc(Number(result.unpaidMicro));
    });
  }

  #onError(frame: Frame): void {
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
      if (rows > 0)
        void this.deps.meter.endStatement(rows, { sql: sqlOf(head), rowCount: rows, failed: true });
      if (head.kind === "execute") this.#units.shift();
    }
    this.#dropUntilSync();
    this.#toClient.push(frame.frame);
  }

  /** After an error the upstream skips the rest of the batch up to Sync: so do our expectations. */
  #dropUntilSync(): void {
    while (this.#units.length > 0 && this.#units[0]!.kind !== "sync" && this.#units[0]!.kind !== "simple")
      this.#units.shift();
  }

  #onReady(frame: Frame): void {
    // ReadyForQuery closes the oldest simple query or Sync-terminated batch.
    while (this.#units.length > 0) {
      const head = this.#units.shift()!;
      if (head.kind === "simple")
        this.deps.metrics.upstreamLatency.observe((performance.now() - head.started) / 1000);
      if (head.kind === "simple" || head.kind === "sync") break;
    }
    this.#status = decodeReadyForQuery(frame.payload);
    this.#cutOff = false;
    this.#toClient.push(frame.frame);
    if (this.#status === "I" && this.#units.length === 0) {
      clearTimeout(this.#idleTimer);
      this.#idleTimer = setTimeout(() => {
        this.#idleTimer = undefined;
        if (this.#units.length === 0 && !this.#ended) {
          this.deps.meter
            .release()
            .catch((error: unknown) => this.deps.logger.warn({ err: error }, "idle release failed"));
        }
      }, this.deps.idleReleaseMs);
      this.#idleTimer.unref();
    }
  }

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
    { hint: "POST /api/deposit credits a USDC transfer to the provider's wallet" },
  );
}
