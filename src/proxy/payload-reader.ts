import { isUtf8 } from "node:buffer";
import { ProtocolViolationError } from "./protocol-violation-error.js";

/** Longest string checked for ASCII byte by byte; longer ones go to the native UTF-8 check at once. */
const ASCII_SCAN_LIMIT = 512;

function isAscii(buffer: Buffer, start: number, end: number): boolean {
  for (let i = start; i < end; i++) if (buffer[i]! > 0x7f) return false;
  return true;
}

/**
 * Bounds-checked cursor over one message payload. Every read past the end, missing terminator or
 * leftover byte becomes a {@link ProtocolViolationError} naming the message, never a RangeError.
 */
export class PayloadReader {
  private offset = 0;

  /**
   * @param buffer the payload (without the type byte and length word)
   * @param what message name used in error texts
   * @param strictUtf8 reject strings that are not valid UTF-8 (frontend input): a lossy decode
   *   would let the guard see different text than the server executes
   */
  constructor(
    private readonly buffer: Buffer,
    private readonly what: string,
    private readonly strictUtf8 = true,
  ) {}

  get remaining(): number {
    return this.buffer.length - this.offset;
  }

  fail(detail: string): never {
    throw new ProtocolViolationError(`invalid ${this.what} message: ${detail}`);
  }

  private need(bytes: number, field: string): void {
    if (this.buffer.length - this.offset < bytes) this.fail(`${field} runs past the end of the message`);
  }

  byte(field: string): number {
    this.need(1, field);
    return this.buffer[this.offset++]!;
  }

  int16(field: string): number {
    this.need(2, field);
    const value = this.buffer.readInt16BE(this.offset);
    this.offset += 2;
    return value;
  }

  /** Counts and OIDs travel as unsigned on the wire (PostgreSQL's pq_getmsgint). */
  uint16(field: string): number {
    this.need(2, field);
    const value = this.buffer.readUInt16BE(this.offset);
    this.offset += 2;
    return value;
  }

  int32(field: string): number {
    this.need(4, field);
    const value = this.buffer.readInt32BE(this.offset);
    this.offset += 4;
    return value;
  }

  uint32(field: string): number {
    this.need(4, field);
    const value = this.buffer.readUInt32BE(this.offset);
    this.offset += 4;
    return value;
  }

  /** A NUL-terminated string; the terminator is consumed, not returned. */
  cstring(field: string): string {
    const { buffer } = this;
    const start = this.offset;
    const end = buffer.indexOf(0, start);
    if (end < 0) this.fail(`${field} is missing its NUL terminator`);
    this.offset = end + 1;
    if (end === start) return "";
    // Names and most statements are short ASCII, which is valid UTF-8: checking that in place is cheaper than
    // the view and native call of isUtf8 (per message on the relay's hot path).
    if (end - start <= ASCII_SCAN_LIMIT && isAscii(buffer, start, end))
      return buffer.toString("latin1", start, end);
    if (this.strictUtf8 && !isUtf8(buffer.subarray(start, end))) this.fail(`${field} is not valid UTF-8`);
    return buffer.toString("utf8", start, end);
  }

  /** A view (no copy) of the next `length` bytes. */
  bytes(length: number, field: string): Buffer {
    if (length < 0) this.fail(`${field} has negative length ${length}`);
    this.need(length, field);
    const view = this.buffer.subarray(this.offset, this.offset + length);
    this.offset += length;
    return view;
  }

  /** A view of everything not read yet. */
  rest(): Buffer {
    const view = this.buffer.subarray(this.offset);
    this.offset = this.buffer.length;
    return view;
  }

  /** PostgreSQL rejects trailing garbage (pq_getmsgend); so do we. */
  end(): void {
    if (this.offset !== this.buffer.length) {
      this.fail(`${this.buffer.length - this.offset} unexpected trailing byte(s)`);
    }
  }
}
