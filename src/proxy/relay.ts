import type { Socket } from "node:net";
import { performance } from "node:perf_hooks";
import type { Logger } from "pino";
import { SqlState } from "../db/sql-state.js";
import { AnswerQueue } from "./answer-queue.js";
import type { TransactionStatus } from "./backend-messages.js";
import { ClientForwarding } from "./client-forwarding.js";
import {
  FRAME_HEADER_LENGTH,
  FRONTEND_MAX_FRAME_LENGTH,
  type Frame,
  FrameBatch,
  FrameReader,
  ROW_HEADER,
  ROW_PIECE,
  type RowDecision,
} from "./frame-reader.js";
import type { SessionSettings } from "./in-band-settings.js";
import { BackendCode, FrontendCode } from "./message-codes.js";
import { OutputBatch } from "./output-batch.js";
import { errorFrame } from "./proxy-errors.js";
import type { ProxyMetrics, ProxyTally } from "./proxy-metrics.js";
import type { RelayWire } from "./relay-wire.js";
import { encodeTerminate } from "./serializer.js";
import type { StatementMetering } from "./statement-metering.js";
import type { StatementPolicy } from "./statement-policy.js";
import { UpstreamAnswers } from "./upstream-answers.js";

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
  /**
   * Cancels the upstream's running statement; the promise settles once the server has taken the cancel (it
   * never rejects). The client's next messages wait for it: see `#cancelling`.
   */
  cancelUpstream(): Promise<void> | void;
  status: TransactionStatus;
  /** After this long idle outside a transaction the session gives back its unspent reservation. */
  idleReleaseMs: number;
  /** How long a closing session waits for the upstream to finish what was forwarded (default 15 s). */
  drainTimeoutMs?: number;
  onEnd(reason: string): void;
}

/**
 * Rows longer than this (or than the row cap, when lower) are decided on from their header before their body is
 * read: a result of rows this size or smaller is read and metered as it arrives, with a chunk or so buffered.
 */
const ADMITTED_ROW_BYTES = 256 * 1024;
/** Messages other than rows are refused above the row cap, but never below this: a RowDescription of many columns. */
const MIN_MESSAGE_CAP = 1024 * 1024;
/** When a client that left mid-statement has its upstream statement cancelled a second time. */
const CANCEL_AGAIN_MS = 250;
/**
 * Answers a session holds back while their query's charge is written (`pgtoll.synchronous_charges`) before it
 * stops reading the upstream: a pipelining client's next queries run meanwhile, within this much memory.
 */
const MAX_HELD_CLIENT_BYTES = 1024 * 1024;

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
 * The ready phase of a proxied session: the two sockets and the frames between them. Each direction's frames
 * are handled strictly in order, as positions in the received chunks, and relayed as ranges of them (a relayed
 * message costs no allocation; a run of DataRows, a few operations per chunk). What each message means is the
 * statement pipeline's: client-forwarding.ts and upstream-answers.ts; a frame it has to wait for (the ledger) pauses its socket until
 * the answer is in, so order is never lost and memory stays bounded. The relay also ends the session: at once,
 * or, when the client leaves with statements upstream, once the upstream has answered them; and it gives the
 * session's hold back when it has been idle.
 */
export class Relay {
  readonly #client: Direction = {
    side: "client",
    reader: new FrameReader({ maxFrameLength: FRONTEND_MAX_FRAME_LENGTH }),
    frames: new FrameBatch(),
    busy: false,
  };
  readonly #upstream: Direction;
  readonly #toClient = new OutputBatch();
  readonly #toUpstream = new OutputBatch();
  readonly #tally: ProxyTally;
  readonly #queue: AnswerQueue;
  readonly #forwarding: ClientForwarding;
  readonly #answers: UpstreamAnswers;
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
  /** Set by `endWhenIdle`: the FATAL that ends the session at its next idle moment. */
  #farewell: { frame: Buffer; reason: string } | undefined;

  constructor(private readonly deps: RelayDeps) {
    const { maxRowBytes } = deps.metering;
    this.#upstream = {
      side: "upstream",
      reader: new FrameReader({
        dataRowRuns: true,
        admitRowsAbove: Math.min(maxRowBytes, ADMITTED_ROW_BYTES) + FRAME_HEADER_LENGTH,
        maxOtherFrameLength: Math.max(maxRowBytes, MIN_MESSAGE_CAP) + 4,
      }),
      frames: new FrameBatch(),
      busy: false,
    };
    this.#tally = deps.metrics.tally;
    const wire: RelayWire = {
      toClient: this.#toClient,
      toUpstream: this.#toUpstream,
      flushToUpstream: () => this.#flushToUpstream(),
      flushToClient: () => this.#flushToClient(),
      becameIdle: (now) => this.#becameIdle(now),
      cancelUpstream: () => this.#cancelUpstream(),
      readUpstream: () => {
        if (!this.#upstream.busy) deps.upstream.resume();
      },
      holdClientOutput: (until) => this.#toClient.holdUntil(until, () => this.#clientOutputReleased()),
      closing: () => this.#closing,
      ended: () => this.#ended,
    };
    const { policy, metering, settings, logger } = deps;
    const queue = new AnswerQueue(deps.status);
    this.#queue = queue;
    this.#forwarding = new ClientForwarding({
      queue,
      policy,
      metering,
      settings,
      logger,
      wire,
      statementSent: metering.pricesTime ? () => this.#answers.statementSent() : undefined,
    });
    this.#answers = new UpstreamAnswers({
      queue,
      policy,
      metering,
      settings,
      tally: this.#tally,
      logger,
      wire,
    });
  }

  get status(): TransactionStatus {
    return this.#queue.status;
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
    return this.#answers.fatalRelayed;
  }

  /**
   * Ends the session with `frame` (a FATAL) once it is idle outside a transaction: at once if it is now, else
   * right after the ReadyForQuery that leaves it so. A stopping server lets its sessions finish their work so.
   * `atOnce` false: not now even if idle, but after the next answer (a session opened for a query to come).
   */
  endWhenIdle(frame: Buffer, reason: string, atOnce = true): void {
    if (this.#ended || this.#closing) return;
    this.#farewell = { frame, reason };
    if (atOnce && this.#quiet) this.#sayFarewell();
  }

  /** Idle outside a transaction, with nothing waiting in either direction: a farewell can go now. */
  get #quiet(): boolean {
    return this.#queue.status === "I" && this.#queue.empty && !this.#client.busy && !this.#upstream.busy;
  }

  #sayFarewell(): void {
    const held = this.#toClient.released();
    if (held) {
      // The last answer waits for its charge to be written: the farewell follows it.
      void held.then(() => {
        if (!this.#ended) this.#sayFarewell();
      });
      return;
    }
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
      if (!this.#upstream.busy && !this.#clientBacksUp) upstream.resume();
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
    const message = `invalid message from the provider's database: ${error.message}`;
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
    if (this.#queue.empty && !this.#upstream.busy) {
      this.end(reason);
      return;
    }
    if (how === "gone" && !this.#queue.mayWrite) {
      // Only reads are left: charge the rows already handed over and drop the upstream, rather than read (and
      // parse) the rest of a result that may fill megabytes of socket buffers. The cancel stops a statement
      // that sends nothing for a while (the server would notice the closed socket only when it next writes).
      this.#cancelForGoneClient();
      this.#answers.abandon();
      this.end(reason);
      return;
    }
    if (how === "gone") {
      this.#cancelForGoneClient();
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

  /**
   * Cancels the statement a client that went away left running, twice: a cancel that reaches a busy server
   * before its backend has read the statement is lost, and the statement would run to its timeout, even once the
   * session has ended (something between pgtoll and the server may close the connection at its Terminate). A
   * cancel for a backend that has exited is dropped by the server.
   */
  #cancelForGoneClient(): void {
    this.deps.cancelUpstream();
    setTimeout(() => this.deps.cancelUpstream(), CANCEL_AGAIN_MS).unref();
  }

  /**
   * A CancelRequest the proxy sent for a statement it cut off, until the server has taken it. The client's next
   * messages wait for it: a cancel is a signal the backend takes whenever it arrives, and one that arrives after
   * the cut statement ended would cancel the client's next statement instead (a backend reading its next command
   * ignores it). Queries the client pipelined before the cut were sent already and may still meet it.
   */
  #cancelling: Promise<void> | undefined;

  #cancelUpstream(): void {
    const sent = this.deps.cancelUpstream();
    if (!sent) return;
    this.#cancelling = sent;
    const forget = () => {
      if (this.#cancelling === sent) this.#cancelling = undefined;
    };
    sent.then(forget, forget);
  }

  /** Stops relaying; the session closes both sockets. Idempotent. */
  end(reason: string): void {
    if (this.#ended) return;
    this.#ended = true;
    // Rows of a statement the upstream never finished (it closed, or broke the protocol) reached the client;
    // whatever waits for the upstream is let go: the passes see the session ended and stop.
    this.#answers.end();
    this.#queue.end();
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
        if (fromClient && this.#cancelling) {
          this.#wait(direction, this.#cancelling);
          return;
        }
        const at = frames.head;
        const code = frames.codes[at]!;
        const buffer = frames.buffers[at]!;
        let end = frames.ends[at]!;
        if (code === ROW_PIECE) {
          // Bytes of a large row streamed through: relayed as they are (upstream-answers.ts admitted the row).
          frames.head++;
          this.#answers.relayPiece(buffer, frames.starts[at]!, end);
          continue;
        }
        if (code >= ROW_HEADER) {
          // The header of a large row (frame-reader.ts's ROW_HEADER): read it or skip it, from its length word.
          frames.head++;
          const bytes = buffer.readInt32BE(frames.starts[at]! + 1) - 4;
          const admitted = this.#answers.admitRow(bytes);
          if (typeof admitted === "string") {
            this.#readRow(admitted);
            continue;
          }
          this.#wait(
            direction,
            admitted.then((decision) => this.#readRow(decision)),
          );
          return;
        }
        if (code === BackendCode.DataRow && !fromClient) {
          // A run of DataRows (or one): relayed at once as far as the reservation pays, the rest one by one.
          if (this.#answers.relayRows(frames, at)) {
            frames.head++;
            continue;
          }
        }
        const start = frames.starts[at]!;
        // One row of a run is handled now; the entry keeps the others for the next pass.
        if (frames.rows[at]! > 1) end = frames.shiftMessage(at);
        else frames.head++;
        let waiting: Promise<void> | undefined;
        if (!fromClient) waiting = this.#answers.handle(code, buffer, start, end);
        else if (code === FrontendCode.Terminate) this.#close("terminated", "client terminated");
        else waiting = this.#forwarding.handle(code, buffer, start, end);
        if (waiting) {
          this.#wait(direction, waiting);
          return;
        }
      }
      frames.clear();
      if (fromClient) this.#flushToUpstream();
      else {
        this.#flushToClient();
        this.#queue.releaseWaiters();
      }
    } catch (error) {
      this.#protocolFailure(direction.side, error as Error);
    }
    direction.busy = false;
  }

  /** Reads, streams or skips the large row whose header was handled; framing goes on after it. */
  #readRow(decision: RowDecision): void {
    const { reader, frames } = this.#upstream;
    try {
      reader.decideRow(decision, frames);
    } catch (error) {
      // What arrived after the row breaks the protocol: the session ends (the pass sees it ended).
      this.#protocolFailure("upstream", error as Error);
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
          if (!this.#clientBacksUp) upstream.resume();
        }
        this.#pump(direction);
      },
      (error: unknown) => this.#internalFailure(error),
    );
  }

  #flushToUpstream(): void {
    // Once closing, the upstream has had its Terminate: nothing may follow it.
    if (this.#closing) return;
    if (!this.#toUpstream.flushTo(this.deps.upstream)) this.deps.client.pause();
  }

  #flushToClient(): void {
    this.#toClient.flushTo(this.deps.client);
    if (this.#clientBacksUp) this.deps.upstream.pause();
  }

  /**
   * Whether the client's side keeps the upstream paused: the client does not read fast enough, or the answers held
   * back for the ledger (`pgtoll.synchronous_charges`) are as much as a session may hold. Never while the client
   * is gone, nor while what the upstream sends is discarded or a stopped row ends (upstream-answers.ts).
   */
  get #clientBacksUp(): boolean {
    return (
      this.#closing !== "gone" &&
      (this.deps.client.writableNeedDrain || this.#toClient.heldBytes > MAX_HELD_CLIENT_BYTES) &&
      !this.#answers.drainsUpstream
    );
  }

  /** A hold on the client's output settled: what it kept goes out, and an upstream paused for it reads again. */
  #clientOutputReleased(): void {
    if (this.#ended) return;
    this.#flushToClient();
    if (!this.#upstream.busy && !this.#clientBacksUp) this.deps.upstream.resume();
  }

  #becameIdle(now: number): void {
    this.#idleSince = now;
    if (this.#farewell && !this.#closing) {
      // Frames the client sent behind the one just answered (a query pipelined behind a SET the proxy answered
      // itself) are read in this same turn: the farewell comes once they are, if the session is still idle.
      setImmediate(this.#farewellIfIdle);
      return;
    }
    this.#idleTimer ??= this.#armIdleTimer(this.deps.idleReleaseMs);
  }

  readonly #farewellIfIdle = (): void => {
    // A frame still waiting (for the ledger, say) is a statement to come: its answer's idle moment ends the session.
    if (this.#farewell && !this.#closing && this.#isIdle() && this.#quiet) this.#sayFarewell();
  };

  #armIdleTimer(delayMs: number): NodeJS.Timeout {
    const timer = setTimeout(this.#onIdleTimer, delayMs);
    timer.unref();
    return timer;
  }

  /**
   * Gives the reservation back now if the session is idle (nothing pending, nothing from the client since its
   * last answer): another session of the agent's needs the funds (`IdleHolds`). Undefined when it is busy.
   */
  releaseIfIdle(): Promise<void> | undefined {
    return this.deps.metering.releaseIfIdle(this.#isIdle);
  }

  /** Nothing pending, nothing from the client since its last answer. */
  readonly #isIdle = (): boolean => !this.#ended && this.#idleSince !== undefined && this.#queue.empty;

  /** Gives the reservation back once the session has been idle for `idleReleaseMs` (else waits the rest). */
  readonly #onIdleTimer = (): void => {
    this.#idleTimer = undefined;
    const since = this.#idleSince;
    if (since === undefined || !this.#isIdle()) return;
    const idleMs = performance.now() - since;
    if (idleMs < this.deps.idleReleaseMs) {
      this.#idleTimer = this.#armIdleTimer(this.deps.idleReleaseMs - idleMs);
      return;
    }
    this.releaseIfIdle()?.catch((error: unknown) =>
      this.deps.logger.warn({ err: error }, "idle release failed"),
    );
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
