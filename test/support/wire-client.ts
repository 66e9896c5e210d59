import { connect, type Socket } from "node:net";
import { decodeDataRow, decodeNoticeFields, type NoticeFields } from "../../src/proxy/backend-messages.js";
import { FrontendCode } from "../../src/proxy/message-codes.js";
import { encodeFrame, encodePasswordMessage, encodeStartupMessage } from "../../src/proxy/serializer.js";

/** One message from the proxy: its type letter and body. */
export interface BackendMessage {
  type: string;
  payload: Buffer;
}

/**
 * A bare TCP PostgreSQL client for tests that must send what no driver would: it writes raw bytes and
 * parses whatever comes back into messages, checking that every byte the server sends is well framed.
 */
export class WireClient {
  readonly socket: Socket;
  readonly closed: Promise<void>;
  /** DataRows received so far. */
  rowsReceived = 0;
  /** Bytes received so far. */
  bytesReceived = 0;
  /** When set, DataRows are only counted, not queued, so large results cost no memory. */
  dropRows = false;
  /** Set when the server sent bytes that are not a well-formed message. */
  malformed: string | undefined;
  #tail: Buffer = Buffer.alloc(0);
  #messages: BackendMessage[] = [];
  #byteWaiter: ((byte: number) => void) | undefined;
  #wake: (() => void) | undefined;
  #isClosed = false;

  private constructor(socket: Socket) {
    this.socket = socket;
    socket.on("error", () => {});
    socket.on("data", (chunk: Buffer) => this.#receive(chunk));
    this.closed = new Promise((resolve) =>
      socket.once("close", () => {
        this.#isClosed = true;
        this.#wake?.();
        resolve();
      }),
    );
  }

  /**
   * `allowHalfOpen` keeps this side writable after the server ends its side, as a hostile client that writes on
   * after it was refused.
   */
  static connect(
    port: number,
    host = "127.0.0.1",
    options: { allowHalfOpen?: boolean } = {},
  ): Promise<WireClient> {
    return new Promise((resolve, reject) => {
      const socket = connect({ host, port, allowHalfOpen: options.allowHalfOpen ?? false });
      socket.setNoDelay(true);
      socket.once("error", reject);
      socket.once("connect", () => {
        socket.removeListener("error", reject);
        resolve(new WireClient(socket));
      });
    });
  }

  get isClosed(): boolean {
    return this.#isClosed;
  }

  send(...buffers: Buffer[]): void {
    if (!this.socket.destroyed)
      this.socket.write(buffers.length === 1 ? buffers[0]! : Buffer.concat(buffers));
  }

  /** Sends an SSLRequest/GSSENCRequest-style packet and resolves with the single-byte answer. */
  requestByte(packet: Buffer, timeoutMs = 5000): Promise<number> {
    return withTimeout(
      new Promise<number>((resolve) => {
        this.#byteWaiter = resolve;
        this.send(packet);
      }),
      timeoutMs,
      "single-byte answer",
    );
  }

  #receive(chunk: Buffer): void {
    this.bytesReceived += chunk.length;
    let data = this.#tail.length > 0 ? Buffer.concat([this.#tail, chunk]) : chunk;
    if (this.#byteWaiter && data.length > 0) {
      const waiter = this.#byteWaiter;
      this.#byteWaiter = undefined;
      waiter(data[0]!);
      data = data.subarray(1);
    }
    let offset = 0;
    while (data.length - offset >= 5 && !this.malformed) {
      const length = data.readInt32BE(offset + 1);
      if (length < 4 || length > 64 * 1024 * 1024) {
        this.malformed = `message ${String.fromCharCode(data[offset]!)} with length ${length}`;
        break;
      }
      if (data.length - offset < length + 1) break;
      const type = String.fromCharCode(data[offset]!);
      if (type === "D") this.rowsReceived++;
      if (type !== "D" || !this.dropRows)
        this.#messages.push({ type, payload: Buffer.from(data.subarray(offset + 5, offset + 1 + length)) });
      offset += length + 1;
    }
    this.#tail = Buffer.from(data.subarray(offset));
    this.#wake?.();
  }

  /** Resolves when `ready()` holds, or rejects after `timeoutMs` (or when the socket closes first). */
  async #waitFor(ready: () => boolean, timeoutMs: number, what: string): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!ready()) {
      if (this.#isClosed)
        throw new Error(`connection closed while waiting for ${what}; got ${this.describe()}`);
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`timed out waiting for ${what}; got ${this.describe()}`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        this.#wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      this.#wake = undefined;
    }
  }

  /** Messages queued so far, as type letters (for failure messages). */
  describe(): string {
    return JSON.stringify(
      this.#messages.map((m) => (m.type === "E" ? `E:${errorOf(m).code}` : m.type)).join(""),
    );
  }

  /** Returns and removes every message up to and including the first of `type`. */
  async until(type: string, timeoutMs = 5000): Promise<BackendMessage[]> {
    await this.#waitFor(() => this.#messages.some((m) => m.type === type), timeoutMs, `message ${type}`);
    const index = this.#messages.findIndex((m) => m.type === type);
    return this.#messages.splice(0, index + 1);
  }

  /** Waits for the server to close the connection; returns the messages it sent before. */
  async untilClosed(timeoutMs = 5000): Promise<BackendMessage[]> {
    await withTimeout(this.closed, timeoutMs, "the server to close the connection").catch((error: Error) => {
      throw new Error(`${error.message}; got ${this.describe()}`);
    });
    return this.#messages.splice(0);
  }

  /** Sends a StartupMessage and answers the cleartext password request with `password`; resolves at ReadyForQuery. */
  async login(params: Record<string, string>, password: string): Promise<BackendMessage[]> {
    this.send(encodeStartupMessage(params));
    const asked = await this.until("R");
    const auth = asked.at(-1)!;
    if (auth.payload.readInt32BE(0) !== 3)
      throw new Error(`expected a cleartext password request, got ${this.describe()}`);
    this.send(encodePasswordMessage(password));
    return this.until("Z");
  }

  /** Simple query; resolves with its messages up to ReadyForQuery. */
  query(sql: string, timeoutMs = 5000): Promise<BackendMessage[]> {
    this.send(encodeFrame(FrontendCode.Query, cstring(sql)));
    return this.until("Z", timeoutMs);
  }

  destroy(): void {
    this.socket.destroy();
  }
}

/** The fields of an ErrorResponse or NoticeResponse. */
export function errorOf(message: BackendMessage): NoticeFields {
  return decodeNoticeFields(message.payload);
}

/** The first ErrorResponse among `messages`, or undefined. */
export function firstError(messages: BackendMessage[]): NoticeFields | undefined {
  const found = messages.find((m) => m.type === "E");
  return found ? errorOf(found) : undefined;
}

/** A NUL-terminated UTF-8 string. */
export function cstring(text: string): Buffer {
  return Buffer.from(`${text}\0`, "utf8");
}

/** The first column of every DataRow among `messages`, as text. */
export function firstColumn(messages: BackendMessage[]): (string | null)[] {
  return messages
    .filter((m) => m.type === "D")
    .map((m) => decodeDataRow(m.payload)[0]?.toString("utf8") ?? null);
}

/** The CommandComplete tags among `messages`. */
export function commandTags(messages: BackendMessage[]): string[] {
  return messages
    .filter((m) => m.type === "C")
    .map((m) => m.payload.toString("utf8", 0, m.payload.length - 1));
}

function withTimeout<T>(promise: Promise<T>, timeoutMs: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    promise.finally(() => clearTimeout(timer)),
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`timed out waiting for ${what}`)), timeoutMs);
    }),
  ]);
}

function int16(value: number): Buffer {
  const b = Buffer.alloc(2);
  b.writeInt16BE(value);
  return b;
}

function int32(value: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeInt32BE(value);
  return b;
}

/** Encoders of the extended-protocol client messages tests need (the proxy's serializer only writes what it sends). */
export const frontend = {
  parse: (name: string, sql: string): Buffer =>
    encodeFrame(FrontendCode.Parse, Buffer.concat([cstring(name), cstring(sql), int16(0)])),
  /** Bind with text parameters and text results. */
  bind: (portal: string, statement: string, params: (string | null)[] = []): Buffer =>
    encodeFrame(
      FrontendCode.Bind,
      Buffer.concat([
        cstring(portal),
        cstring(statement),
        int16(0),
        int16(params.length),
        ...params.map((p) =>
          p === null ? int32(-1) : Buffer.concat([int32(Buffer.byteLength(p)), Buffer.from(p)]),
        ),
        int16(0),
      ]),
    ),
  execute: (portal: string, maxRows = 0): Buffer =>
    encodeFrame(FrontendCode.Execute, Buffer.concat([cstring(portal), int32(maxRows)])),
  describe: (kind: "S" | "P", name: string): Buffer =>
    encodeFrame(FrontendCode.Describe, Buffer.concat([Buffer.from(kind), cstring(name)])),
  close: (kind: "S" | "P", name: string): Buffer =>
    encodeFrame(FrontendCode.Close, Buffer.concat([Buffer.from(kind), cstring(name)])),
  /** FunctionCall of `oid` with no arguments, text result. */
  functionCall: (oid: number): Buffer =>
    encodeFrame(FrontendCode.FunctionCall, Buffer.concat([int32(oid), int16(0), int16(0), int16(0)])),
  copyData: (data: string): Buffer => encodeFrame(FrontendCode.CopyData, Buffer.from(data)),
  copyDone: (): Buffer => encodeFrame(FrontendCode.CopyDone),
  copyFail: (message: string): Buffer => encodeFrame(FrontendCode.CopyFail, cstring(message)),
  flush: (): Buffer => encodeFrame(FrontendCode.Flush),
};

/** An untyped startup-phase packet: length word, then `code`, then `body`; `length` overrides the true length. */
export function startupPacket(
  code: number,
  body: Buffer = Buffer.alloc(0),
  length = 8 + body.length,
): Buffer {
  return Buffer.concat([int32(length), int32(code), body]);
}
