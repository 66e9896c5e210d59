import { randomBytes } from "node:crypto";
import type { Socket } from "node:net";
import { SqlState } from "../db/sql-state.js";
import { findReadOnlyViolation } from "../guard/index.js";
import { decodeParameterStatus } from "./backend-messages.js";
import { FRONTEND_MAX_FRAME_LENGTH, type Frame, FrameReader } from "./frame-reader.js";
import { decodeParse, decodeQuery } from "./frontend-messages.js";
import { BackendCode, FrontendCode } from "./message-codes.js";
import { errorFrame } from "./proxy-errors.js";
import { encodeParse, encodeQuery } from "./serializer.js";

/** SQLSTATE read_only_sql_transaction: what PostgreSQL answers a write in a read-only transaction. */

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
    const fromUpstream = new FrameReader();
    const screened = early.map((frame) => this.#screenClientFrame(frame));
    if (screened.length > 0) upstream.write(Buffer.concat(screened));
    this.#relayFrames(client, upstream, fromClient, (frame) => this.#screenClientFrame(frame));
    this.#relayFrames(upstream, client, fromUpstream, (frame) => this.#screenUpstreamFrame(frame));
    client.resume();
    upstream.resume();
  }

  /** Frames from `source` go to `target` as `screen` rewrites them (null ends the session); with backpressure. */
  #relayFrames(
    source: Socket,
    target: Socket,
    reader: FrameReader,
    screen: (frame: Frame) => Buffer | null,
  ): void {
    target.on("drain", () => source.resume());
    source.on("data", (chunk: Buffer) => {
      const out: Buffer[] = [];
      try {
        reader.feed(chunk, (frame) => {
          const rewritten = screen(frame);
          if (rewritten === null) throw new SessionEnded();
          out.push(rewritten);
        });
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
