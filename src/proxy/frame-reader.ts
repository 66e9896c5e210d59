import { ProtocolViolationError } from "./protocol-violation-error.js";

/** Type byte + int32 length. */
export const FRAME_HEADER_LENGTH = 5;

/** PostgreSQL's own cap on one message (MaxAllocSize): the right limit for backend traffic. */
export const BACKEND_MAX_FRAME_LENGTH = 1024 * 1024 * 1024;

/** A generous cap for client traffic: bigger Query/Bind/CopyData messages are refused. */
export const FRONTEND_MAX_FRAME_LENGTH = 64 * 1024 * 1024;

/** One complete typed message. */
export interface Frame {
  /** Type byte, compare with `FrontendCode` / `BackendCode`. */
  readonly code: number;
  /** The body after the length word. A view into `frame`. */
  readonly payload: Buffer;
  /** The whole message, header included: write it as-is to relay without copying. */
  readonly frame: Buffer;
}

// The payload view is made on first use: relaying DataRows only needs `frame`, and a subarray per
// row is measurable on large results.
class LazyFrame implements Frame {
  private body: Buffer | undefined;

  constructor(
    readonly code: number,
    readonly frame: Buffer,
  ) {}

  get payload(): Buffer {
    this.body ??= this.frame.subarray(FRAME_HEADER_LENGTH);
    return this.body;
  }
}

/** Receives one frame as its type byte and its bytes `buffer[start, end)` (header included). */
type FrameSink = (code: number, buffer: Buffer, start: number, end: number) => void;

/**
 * Frames read and not handled yet, as positions in the chunks they arrived in: parallel arrays reused from
 * chunk to chunk, so relaying a frame allocates nothing. `head` is the next frame to handle.
 */
export class FrameBatch {
  readonly codes: number[] = [];
  readonly buffers: (Buffer | undefined)[] = [];
  readonly starts: number[] = [];
  readonly ends: number[] = [];
  length = 0;
  head = 0;

  readonly add: FrameSink = (code, buffer, start, end) => {
    const at = this.length++;
    this.codes[at] = code;
    this.buffers[at] = buffer;
    this.starts[at] = start;
    this.ends[at] = end;
  };

  /** Appends a whole frame (e.g. one read during startup). */
  addFrame(frame: Frame): void {
    this.add(frame.code, frame.frame, 0, frame.frame.length);
  }

  /** Forgets every frame, and the chunks they point into; a batch that grew large gives its room back. */
  clear(): void {
    if (this.codes.length > 1024) {
      this.codes.length = 0;
      this.buffers.length = 0;
      this.starts.length = 0;
      this.ends.length = 0;
    } else {
      for (let i = 0; i < this.length; i++) this.buffers[i] = undefined;
    }
    this.length = 0;
    this.head = 0;
  }
}

export interface FrameReaderOptions {
  /**
   * Largest accepted value of the length word (which counts itself but not the type byte).
   * Default {@link BACKEND_MAX_FRAME_LENGTH}; use {@link FRONTEND_MAX_FRAME_LENGTH} for clients.
   */
  maxFrameLength?: number;
}

/**
 * Streaming splitter of protocol 3.0 messages: feed socket chunks of any size, get whole frames.
 *
 * Frames that lie inside one chunk are handed out as views of that chunk (no copy). Only a frame
 * straddling chunks is assembled, with one allocation of its exact size once its last byte is in;
 * until then the pieces are kept as views, so memory tracks the bytes received, not the length a
 * peer claims. At most one partial frame is buffered.
 *
 * Warning: frames are views of the caller's chunks; do not reuse or mutate a chunk after feeding it.
 * After a {@link ProtocolViolationError} the reader is failed and every later `feed` rethrows.
 */
export class FrameReader {
  private readonly maxFrameLength: number;
  private pieces: Buffer[] = [];
  private pendingBytes = 0;
  /** Total bytes of the straddling frame, or -1 while its header is still incomplete. */
  private pendingTotal = -1;
  private failure: ProtocolViolationError | undefined;

  constructor(options: FrameReaderOptions = {}) {
    this.maxFrameLength = options.maxFrameLength ?? BACKEND_MAX_FRAME_LENGTH;
  }

  /** Bytes held for an incomplete frame (0 at a message boundary). */
  get bufferedBytes(): number {
    return this.pendingBytes;
  }

  /**
   * Consumes a chunk and calls `onFrame` for each frame it completes, in order.
   * @throws ProtocolViolationError on a length word below 4 or above the configured maximum
   */
  feed(chunk: Buffer, onFrame: (frame: Frame) => void): void {
    this.#scan(chunk, (code, buffer, start, end) =>
      onFrame(
        new LazyFrame(code, start === 0 && end === buffer.length ? buffer : buffer.subarray(start, end)),
      ),
    );
  }

  /**
   * Like {@link feed}, but appends the frames to `batch` as positions, allocating nothing per frame: the
   * relay's hot path. The whole chunk is framed before the caller handles any of it, so a bad length word
   * is seen before anything of the chunk is acted on.
   */
  feedInto(chunk: Buffer, batch: FrameBatch): void {
    this.#scan(chunk, batch.add);
  }

  #scan(chunk: Buffer, onFrame: FrameSink): void {
    if (this.failure) throw this.failure;
    let offset = 0;
    if (this.pendingBytes > 0) {
      offset = this.continuePending(chunk, onFrame);
      if (offset < 0) return;
    }
    const end = chunk.length;
    while (end - offset >= FRAME_HEADER_LENGTH) {
      const total = this.frameTotal(chunk.readInt32BE(offset + 1), chunk[offset]!);
      if (end - offset < total) {
        this.pendingTotal = total;
        break;
      }
      onFrame(chunk[offset]!, chunk, offset, offset + total);
      offset += total;
    }
    if (offset < end) {
      this.pieces.push(chunk.subarray(offset));
      this.pendingBytes = end - offset;
    }
  }

  /** Returns the chunk offset after the completed frame, or -1 when the whole chunk was absorbed. */
  private continuePending(chunk: Buffer, onFrame: FrameSink): number {
    let used = 0;
    if (this.pendingTotal < 0) {
      const missing = FRAME_HEADER_LENGTH - this.pendingBytes;
      if (chunk.length < missing) {
        this.pieces.push(chunk);
        this.pendingBytes += chunk.length;
        return -1;
      }
      // The header itself straddles chunks: join its few bytes to read the length.
      used = missing;
      const header = Buffer.concat([...this.pieces, chunk.subarray(0, used)], FRAME_HEADER_LENGTH);
      this.pendingTotal = this.frameTotal(header.readInt32BE(1), header[0]!);
      this.pieces = [header];
      this.pendingBytes = FRAME_HEADER_LENGTH;
    }
    const take = Math.min(this.pendingTotal - this.pendingBytes, chunk.length - used);
    if (take > 0) this.pieces.push(chunk.subarray(used, used + take));
    this.pendingBytes += take;
    used += take;
    if (this.pendingBytes < this.pendingTotal) return -1;

    const frame = this.pieces.length === 1 ? this.pieces[0]! : Buffer.concat(this.pieces, this.pendingTotal);
    this.pieces = [];
    this.pendingBytes = 0;
    this.pendingTotal = -1;
    onFrame(frame[0]!, frame, 0, frame.length);
    return used;
  }

  private frameTotal(length: number, code: number): number {
    if (length < 4 || length > this.maxFrameLength) {
      const type = JSON.stringify(String.fromCharCode(code));
      this.failure = new ProtocolViolationError(
        length < 4
          ? `invalid message length ${length} for message type ${type}`
          : `message type ${type} of ${length} bytes exceeds the limit of ${this.maxFrameLength}`,
      );
      this.pieces = [];
      this.pendingBytes = 0;
      throw this.failure;
    }
    return length + 1;
  }
}
