import { randomBytes } from "node:crypto";
import type { Socket } from "node:net";
import { SqlState } from "../db/sql-state.js";
import { findReadOnlyViolation } from "../guard/index.js";
import { decodeParameterStatus } from "./backend-messages.js";
import {
  FRAME_HEADER_LENGTH,
  FRONTEND_MAX_FRAME_LENGTH,
  type Frame,
  FrameBatch,
  FrameReader,
  ROW_HEADER,
  ROW_PIECE,
} from "./frame-reader.js";
import { decodeParse, decodeQuery } from "./frontend-messages.js";
import { BackendCode, FrontendCode } from "./message-codes.js";
import { errorFrame } from "./proxy-errors.js";
import { encodeParse, encodeQuery } from "./serializer.js";

/** Rows (and COPY data) longer than this pass through a read-only endpoint as they arrive, never held whole. */
const STREAMED_ROW_BYTES = 64 * 1024;
/**
 * Other messages from the database are read whole, to be screened: above this (an error quoting a huge value)
 * the session ends rather than hold it.
 */
const MAX_SCREENED_MESSAGE_BYTES = 16 * 1024 * 1024;

export interface EndpointRelayOptions {
  client: Socket;
  upstream: Socket;
  endpointId: string;
  /**
   * The upstream session started with `default_transaction_read_only=on`: Query and Parse messages that would
   * switch it off are refused, and the session ends if the server reports it off anyway (a function did it).
   */
  readOnly: boolean;
  /** Called once, when either side has gone; both sockets are closed by then. */
  onEnd(reason: string): void;
}

/**
 * The ready phase of an endpoint session: the owner's own database, so nothing is metered or guarded. A
 * read_write endpoint relays bytes as they are. A read-only endpoint reads both directions frame by frame:
 * a refused statement is replaced upstream by a text that cannot parse and carries a per-session token, so
 * PostgreSQL itself fails it with the right transaction semantics (aborted block, skipped extended batch) and
 * the proxy shows the client its own error in place of the syntax error that carries the token.
 */
export class EndpointRelay {
  readonly #token = `pgtoll_refused_${randomBytes(8).toString("hex")}_`;
  readonly #refusals = new Map<string, string>();
  #refused = 0;
  #ended = false;

  constructor(private readonly options: EndpointRelayOptions) {}

  start(early: Frame[]): void {
    const { client, upstream } = this.options;
    // Either side may have gone while the session was being admitted: its close has been and gone.
    if (client.destroyed || upstream.destroyed) {
      this.#end("gone before the relay started");
      return;
    }
    client.on("close", () => this.#end("client closed"));
    upstream.on("close", () => this.#end("upstream closed"));
    upstream.on("error", () => {});
    if (!this.options.readOnly) {
      if (early.length > 0) upstream.write(Buffer.concat(early.map((frame) => frame.frame)));
      client.pipe(upstream);
      upstream.pipe(client);
      return;
    }
    const fromClient = new FrameReader({ maxFrameLength: FRONTEND_MAX_FRAME_LENGTH });
    const fromUpstream = new FrameReader({
      admitRowsAbove: STREAMED_ROW_BYTES + FRAME_HEADER_LENGTH,
      maxOtherFrameLength: MAX_SCREENED_MESSAGE_BYTES + 4,
    });
    const screened = early.map((frame) => this.#screenClientFrame(frame));
    if (screened.length > 0) upstream.write(Buffer.concat(screened));
    this.#relayFrames(client, upstream, (chunk, out) =>
      fromClient.feed(chunk, (frame) => out.push(this.#screenClientFrame(frame))),
    );
    const batch = new FrameBatch();
    this.#relayFrames(upstream, client, (chunk, out) => this.#readUpstream(fromUpstream, batch, chunk, out));
    client.resume();
    upstream.resume();
  }

  /**
   * Frames the upstream's `chunk` into `out`: a large row passes through in pieces as it arrives (only errors and
   * parameter changes need reading), the other messages as `#screenUpstreamFrame` rewrites them.
   */
  #readUpstream(reader: FrameReader, batch: FrameBatch, chunk: Buffer, out: Buffer[]): void {
    reader.feedInto(chunk, batch);
    try {
      while (batch.head < batch.length) {
        const at = batch.head++;
        const code = batch.codes[at]!;
        const buffer = batch.buffers[at]!;
        const start = batch.starts[at]!;
        const end = batch.ends[at]!;
        if (code === ROW_PIECE) out.push(buffer.subarray(start, end));
        // The header is the first bytes of the row's pieces.
        else if (code >= ROW_HEADER) reader.streamRow(batch);
        else {
          const frame = buffer.subarray(start, end);
          const rewritten = this.#screenUpstreamFrame({
            code,
            frame,
            payload: frame.subarray(FRAME_HEADER_LENGTH),
          });
          if (rewritten === null) throw new SessionEnded();
          out.push(rewritten);
        }
      }
    } finally {
      batch.clear();
    }
  }

  /**
   * Chunks from `source` go to `target` as `frame` turns them into messages (it throws {@link SessionEnded} to end
   * the session); with backpressure.
   */
  #relayFrames(source: Socket, target: Socket, frame: (chunk: Buffer, out: Buffer[]) => void): void {
    target.on("drain", () => source.resume());
    source.on("data", (chunk: Buffer) => {
      const out: Buffer[] = [];
      try {
        frame(chunk, out);
      } catch (error) {
        if (!(error instanceof SessionEnded)) {
          const message = `protocol violation: ${(error as Error).message}`;
          this.options.client.write(errorFrame(SqlState.protocolViolation, message, { fatal: true }));
        }
        this.#end("protocol");
        return;
      }
      // One copy per chunk: frames are views into buffers the reader may reuse.
      if (out.length > 0 && !target.write(out.length === 1 ? Buffer.from(out[0]!) : Buffer.concat(out)))
        source.pause();
    });
  }

  #screenClientFrame(frame: Frame): Buffer {
    if (frame.code === FrontendCode.Query) {
      const denial = findReadOnlyViolation(decodeQuery(frame.payload).sql);
      if (denial) return encodeQuery(this.#standIn(denial.message));
    } else if (frame.code === FrontendCode.Parse) {
      const denial = findReadOnlyViolation(decodeParse(frame.payload).sql);
      if (denial) return encodeParse("", this.#standIn(denial.message));
    }
    return frame.frame;
  }

  #screenUpstreamFrame(frame: Frame): Buffer | null {
    if (frame.code === BackendCode.ErrorResponse && this.#refusals.size > 0) {
      const text = frame.payload.toString("utf8");
      const at = text.indexOf(this.#token);
      if (at >= 0) {
        const id = /^\d+/.exec(text.slice(at + this.#token.length))?.[0] ?? "";
        const message = this.#refusals.get(id);
        if (message !== undefined) {
          this.#refusals.delete(id);
          return errorFrame(SqlState.readOnlyTransaction, message);
        }
      }
    } else if (frame.code === BackendCode.ParameterStatus) {
      const { name, value } = decodeParameterStatus(frame.payload);
      if (name === "default_transaction_read_only" && value !== "on") {
        const message = `endpoint ${this.options.endpointId} is read-only: the session was switched to read-write and is closed`;
        this.options.client.write(errorFrame(SqlState.readOnlyTransaction, message, { fatal: true }));
        return null;
      }
    }
    return frame.frame;
  }

  /** The unparsable text sent in place of a refused statement; its syntax error names the token. */
  #standIn(message: string): string {
    const id = String(++this.#refused);
    this.#refusals.set(id, message);
    return `${this.#token}${id}`;
  }

  #end(reason: string): void {
    if (this.#ended) return;
    this.#ended = true;
    const { client, upstream } = this.options;
    // Half-close, not destroy: what the client sent before it left (a last INSERT, Terminate) still runs.
    client.end();
    upstream.end();
    setTimeout(() => {
      client.destroy();
      upstream.destroy();
    }, 5000).unref();
    this.options.onEnd(reason);
  }
}

class SessionEnded extends Error {}
