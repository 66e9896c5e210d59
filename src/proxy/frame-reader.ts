import { ProtocolViolationError } from "./protocol-violation-error.js";

/** Type byte + int32 length. */
export const FRAME_HEADER_LENGTH = 5;

/** DataRow's type byte ('D' from the server; the same letter is Describe from a client). */
const DATA_ROW = 0x44;

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
 * chunk to chunk, so relaying a frame allocates nothing. `head` is the next frame to handle. An entry may be a
 * run of DataRows that lie back to back in one chunk (`rows` of them, from a reader with `dataRowRuns`): a
 * result of a thousand rows is then a handful of entries, not a thousand.
 */
export class FrameBatch {
  readonly codes: number[] = [];
  readonly buffers: (Buffer | undefined)[] = [];
  readonly starts: number[] = [];
  readonly ends: number[] = [];
  /** Messages in the entry: 1, or the DataRows of a run. */
  readonly rows: number[] = [];
  length = 0;
  head = 0;

  readonly add: FrameSink = (code, buffer, start, end) => {
    this.addRun(code, buffer, start, end, 1);
  };

  /** Appends `count` messages of type `code` that lie back to back in `buffer[start, end)`. */
  addRun(code: number, buffer: Buffer, start: number, end: number, count: number): void {
    const at = this.length++;
    this.codes[at] = code;
    this.buffers[at] = buffer;
    this.starts[at] = start;
    this.ends[at] = end;
    this.rows[at] = count;
  }

  /** Takes the first message off entry `at`, a run of more than one; returns where it ends. */
  shiftMessage(at: number): number {
    return this.shiftMessages(at, 1);
  }

  /** Takes the first `count` messages off entry `at` (fewer than it holds); returns where they end. */
  shiftMessages(at: number, count: number): number {
    const buffer = this.buffers[at]!;
    let end = this.starts[at]!;
    for (let i = 0; i < count; i++) end += 1 + buffer.readInt32BE(end + 1);
    this.starts[at] = end;
    this.rows[at]! -= count;
    return end;
  }

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
      this.rows.length = 0;
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
  /**
   * `feedInto` appends DataRows that lie back to back in a chunk as one entry (a run, see {@link FrameBatch}),
   * walking their length words in a tight loop. Warning: for backend traffic only; a client's 'D' is Describe.
   */
  dataRowRuns?: boolean;
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
  private readonly dataRowRuns: boolean;
  private pieces: Buffer[] = [];
  private pendingBytes = 0;
  /** Total bytes of the straddling frame, or -1 while its header is still incomplete. */
  private pendingTotal = -1;
  private failure: ProtocolViolationError | undefined;

  constructor(options: FrameReaderOptions = {}) {
    this.maxFrameLength = options.maxFrameLength ?? BACKEND_MAX_FRAME_LENGTH;
    this.dataRowRuns = options.dataRowRuns ?? false;
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
    this.#scan(chunk, batch.add, this.dataRowRuns ? batch : undefined);
  }

  #scan(chunk: Buffer, onFrame: FrameSink, runs?: FrameBatch): void {
    if (this.failure) throw this.failure;
    let offset = 0;
    if (this.pendingBytes > 0) {
      offset = this.continuePending(chunk, onFrame);
      if (offset < 0) return;
    }
    const end = chunk.length;
    while (end - offset >= FRAME_HEADER_LENGTH) {
      const code = chunk[offset]!;
      const total = this.frameTotal(chunk.readInt32BE(offset + 1), code);
      if (end - offset < total) {
        this.pendingTotal = total;
        break;
      }
      if (code === DATA_ROW && runs) {
        offset = this.#scanRun(chunk, offset, offset + total, runs);
        continue;
      }
      onFrame(code, chunk, offset, offset + total);
      offset += total;
    }
    if (offset < end) {
      this.pieces.push(chunk.subarray(offset));
      this.pendingBytes = end - offset;
    }
  }

  /**
   * Extends the DataRow at `[start, next)` with the complete DataRows that follow it in the chunk and appends them
   * as one run; returns the offset after the run. The length word is read byte by byte: the hot loop of a large
   * result, where Buffer.readInt32BE's checks show.
   */
  #scanRun(chunk: Buffer, start: number, next: number, runs: FrameBatch): number {
    const end = chunk.length;
    let offset = next;
    let count = 1;
    while (end - offset >= FRAME_HEADER_LENGTH && chunk[offset] === DATA_ROW) {
      const length =
        (chunk[offset + 1]! << 24) |
        (chunk[offset + 2]! << 16) |
        (chunk[offset + 3]! << 8) |
        chunk[offset + 4]!;
      const total = this.frameTotal(length, DATA_ROW);
      if (end - offset < total) break;
      offset += total;
      count++;
    }
    runs.addRun(DATA_ROW, chunk, start, offset, count);
    return offset;
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
