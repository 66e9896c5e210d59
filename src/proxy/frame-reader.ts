import { ProtocolViolationError } from "./protocol-violation-error.js";

/** Type byte + int32 length. */
export const FRAME_HEADER_LENGTH = 5;

/** DataRow's type byte ('D' from the server; the same letter is Describe from a client). */
const DATA_ROW = 0x44;
/** CopyData's type byte: a row of COPY TO STDOUT from the server. */
const COPY_DATA = 0x64;

/**
 * Batch entry code of a row's header read ahead of its body (see `FrameReaderOptions.admitRowsAbove`): this bit
 * with the row's own type byte. The entry is the header's 5 bytes; the row's length is its length word.
 */
export const ROW_HEADER = 0x100;

/**
 * Batch entry code of a piece of a large row that is passed through as it arrives (see
 * {@link FrameReader.streamRow}): bytes of the row, header first, to relay as they are; not a message.
 */
export const ROW_PIECE = 0x200;

/** What the reader does with a large row whose header it handed out. */
export type RowDecision = "read" | "stream" | "skip";

/** PostgreSQL's own cap on one message (MaxAllocSize): the right limit for backend traffic. */
export const BACKEND_MAX_FRAME_LENGTH = 1024 * 1024 * 1024;

/** A generous cap for client traffic: bigger Query/Bind/CopyData messages are refused. */
export const FRONTEND_MAX_FRAME_LENGTH = 64 * 1024 * 1024;

/** A straddling frame longer than this is assembled in one buffer of its size as it arrives (see `#assembles`). */
const ASSEMBLED_FRAME_BYTES = 64 * 1024;

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
  /**
   * A DataRow or CopyData whose length word is above this is not read on: `feedInto` appends its header alone
   * (an entry of code {@link ROW_HEADER} | its type) and parks what follows, unread, until the caller decides
   * with {@link FrameReader.admitRow} or {@link FrameReader.skipRow} (which discards its body as it arrives, never
   * holding it). Backend traffic only; unset: every row is read whole.
   */
  admitRowsAbove?: number;
  /**
   * Largest accepted length word of a message other than DataRow and CopyData (those are bounded by
   * `maxFrameLength` and `admitRowsAbove`). Default `maxFrameLength`.
   */
  maxOtherFrameLength?: number;
}

/**
 * Streaming splitter of protocol 3.0 messages: feed socket chunks of any size, get whole frames.
 *
 * Frames that lie inside one chunk are handed out as views of that chunk (no copy). Only a frame
 * straddling chunks is assembled, with one allocation of its exact size once its last byte is in;
 * until then the pieces are kept as views, so memory tracks the bytes received, not the length a
 * peer claims (a reader with `admitRowsAbove`, whose lengths are bounded, copies a large one in as it arrives). At most one partial frame is buffered.
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
  private readonly admitRowsAbove: number;
  private readonly maxOtherFrameLength: number;
  /** The straddling frame, copied in as it arrives (see `#assembles`); its first `pendingBytes` are in. */
  private assembly: Buffer | undefined;
  /** Chunks that arrived after a large row's header, unread until the row is admitted or skipped. */
  private parked: Buffer[] | undefined;
  /** The row whose header was handed out; its total length, header included. */
  private parkedTotal = 0;
  /** The next large row's header is not handed out again: it was admitted. */
  private admitted = false;
  /** Bytes of a skipped row still to come, dropped as they arrive. */
  private skipping = 0;
  /** Bytes of a streamed row still to come, handed out as pieces as they arrive. */
  private passing = 0;

  constructor(options: FrameReaderOptions = {}) {
    this.maxFrameLength = options.maxFrameLength ?? BACKEND_MAX_FRAME_LENGTH;
    this.dataRowRuns = options.dataRowRuns ?? false;
    this.admitRowsAbove = options.admitRowsAbove ?? Number.POSITIVE_INFINITY;
    this.maxOtherFrameLength = options.maxOtherFrameLength ?? this.maxFrameLength;
  }

  /** Bytes of a skipped row discarded so far, over the reader's life. */
  skippedBytes = 0;

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
    if (this.parked) {
      if (this.failure) throw this.failure;
      this.parked.push(chunk);
      return;
    }
    this.#scan(chunk, batch.add, this.dataRowRuns ? batch : undefined);
  }

  /** Carries out the caller's decision on the large row whose header was handed out (see the three methods). */
  decideRow(decision: RowDecision, batch: FrameBatch): void {
    if (decision === "read") this.admitRow(batch);
    else if (decision === "stream") this.streamRow(batch);
    else this.skipRow(batch);
  }

  /** The large row whose header was handed out is read whole; what arrived after its header is framed into `batch`. */
  admitRow(batch: FrameBatch): void {
    this.admitted = true;
    this.#unpark(batch);
  }

  /**
   * The large row whose header was handed out is passed through, never held whole: its bytes, header included,
   * are appended to `batch` as {@link ROW_PIECE} entries as they arrive (views of the chunks), and framing goes on
   * after it. Memory then follows the socket's chunks, not the row's length.
   */
  streamRow(batch: FrameBatch): void {
    this.passing = this.parkedTotal;
    this.#unpark(batch);
  }

  /**
   * The large row whose header was handed out is not read: its bytes are dropped as they arrive, and framing
   * goes on after it. What arrived after its header is framed into `batch`.
   */
  skipRow(batch: FrameBatch): void {
    this.skipping = this.parkedTotal;
    this.#unpark(batch);
  }

  #unpark(batch: FrameBatch): void {
    const parked = this.parked;
    if (!parked) return;
    this.parked = undefined;
    // A chunk may hold the header of the next large row: feedInto parks the chunks after it again.
    for (const chunk of parked) this.feedInto(chunk, batch);
  }

  #scan(chunk: Buffer, onFrame: FrameSink, runs?: FrameBatch): void {
    if (this.failure) throw this.failure;
    let offset = 0;
    if (this.skipping > 0) {
      offset = Math.min(this.skipping, chunk.length);
      this.skipping -= offset;
      this.skippedBytes += offset;
      if (offset === chunk.length) return;
    } else if (this.passing > 0) {
      offset = Math.min(this.passing, chunk.length);
      this.passing -= offset;
      onFrame(ROW_PIECE, chunk, 0, offset);
      if (offset === chunk.length) return;
    } else if (this.pendingBytes > 0) {
      offset = this.continuePending(chunk, onFrame);
      if (offset < 0) return;
    }
    const end = chunk.length;
    while (end - offset >= FRAME_HEADER_LENGTH) {
      const code = chunk[offset]!;
      const total = this.frameTotal(chunk.readInt32BE(offset + 1), code);
      if (total > this.admitRowsAbove && (code === DATA_ROW || code === COPY_DATA)) {
        if (!this.admitted) {
          this.#park(chunk, offset, total, onFrame);
          return;
        }
        this.admitted = false;
      }
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
      this.pendingBytes = end - offset;
      if (this.#assembles(this.pendingTotal)) {
        this.assembly = Buffer.allocUnsafe(this.pendingTotal);
        chunk.copy(this.assembly, 0, offset);
      } else this.pieces.push(chunk.subarray(offset));
    }
  }

  /**
   * Whether a frame of `total` bytes straddling chunks is copied into one buffer of its size as it arrives,
   * rather than kept as views of its chunks and joined at its end (which holds it twice at that moment). Only a
   * reader that decides on large rows from their header does: its frames' lengths are bounded by what it admits.
   */
  #assembles(total: number): boolean {
    return total > ASSEMBLED_FRAME_BYTES && this.admitRowsAbove !== Number.POSITIVE_INFINITY;
  }

  /** Hands out the header of the large row at `chunk[offset]` and keeps the chunk from there unread. */
  #park(chunk: Buffer, offset: number, total: number, onFrame: FrameSink): void {
    this.parked = [offset === 0 ? chunk : chunk.subarray(offset)];
    this.parkedTotal = total;
    onFrame(ROW_HEADER | chunk[offset]!, chunk, offset, offset + FRAME_HEADER_LENGTH);
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
      if (end - offset < total || total > this.admitRowsAbove) break;
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
      const code = header[0]!;
      const total = this.frameTotal(header.readInt32BE(1), code);
      if (total > this.admitRowsAbove && (code === DATA_ROW || code === COPY_DATA) && !this.admitted) {
        // The header is read again from the parked bytes once the row is admitted.
        this.pieces = [];
        this.pendingBytes = 0;
        this.#park(header, 0, total, onFrame);
        this.parked!.push(chunk.subarray(used));
        return -1;
      }
      this.pendingTotal = total;
      this.pendingBytes = FRAME_HEADER_LENGTH;
      if (this.#assembles(total)) {
        this.assembly = Buffer.allocUnsafe(total);
        header.copy(this.assembly);
        this.pieces = [];
      } else this.pieces = [header];
    }
    const take = Math.min(this.pendingTotal - this.pendingBytes, chunk.length - used);
    if (take > 0) {
      if (this.assembly) chunk.copy(this.assembly, this.pendingBytes, used, used + take);
      else this.pieces.push(chunk.subarray(used, used + take));
    }
    this.pendingBytes += take;
    used += take;
    if (this.pendingBytes < this.pendingTotal) return -1;

    const frame =
      this.assembly ??
      (this.pieces.length === 1 ? this.pieces[0]! : Buffer.concat(this.pieces, this.pendingTotal));
    this.assembly = undefined;
    this.pieces = [];
    this.pendingBytes = 0;
    this.pendingTotal = -1;
    onFrame(frame[0]!, frame, 0, frame.length);
    return used;
  }

  private frameTotal(length: number, code: number): number {
    const max =
      code === DATA_ROW || code === COPY_DATA || length <= this.maxOtherFrameLength
        ? this.maxFrameLength
        : this.maxOtherFrameLength;
    if (length < 4 || length > max) {
      const type = JSON.stringify(String.fromCharCode(code));
      this.failure = new ProtocolViolationError(
        length < 4
          ? `invalid message length ${length} for message type ${type}`
          : `message type ${type} of ${length} bytes exceeds the limit of ${max}`,
      );
      this.pieces = [];
      this.assembly = undefined;
      this.pendingBytes = 0;
      throw this.failure;
    }
    return length + 1;
  }
}
