import { FRAME_HEADER_LENGTH } from "./frame-reader.js";

/** The binary COPY file signature, "PGCOPY\n\377\r\n\0", that opens the header. */
const BINARY_SIGNATURE = Buffer.from("PGCOPY\n\xff\r\n\0", "latin1");
/** Signature, flags (int32) and header extension length (int32, 0 from PostgreSQL). */
const BINARY_HEADER_LENGTH = BINARY_SIGNATURE.length + 8;

/**
 * Whether the CopyData frame `buffer[start, end)` of a binary COPY is its trailer, the int16 -1 that ends the
 * data (a tuple starts with its field count, never negative), alone or after the header when there are no rows.
 * The trailer is framing, not a row, and is not charged.
 */
export function isBinaryCopyTrailer(buffer: Buffer, start: number, end: number): boolean {
  const payload = end - start - FRAME_HEADER_LENGTH;
  if (buffer[end - 1] !== 0xff || buffer[end - 2] !== 0xff) return false;
  if (payload === 2) return true;
  const at = start + FRAME_HEADER_LENGTH;
  return (
    payload === BINARY_HEADER_LENGTH + 2 &&
    buffer.compare(BINARY_SIGNATURE, 0, BINARY_SIGNATURE.length, at, at + BINARY_SIGNATURE.length) === 0
  );
}

/** Whether a CopyOutResponse frame announces binary data (its overall format byte is 1). */
export function isBinaryCopy(buffer: Buffer, start: number): boolean {
  return buffer[start + FRAME_HEADER_LENGTH] === 1;
}

/** The COPY being relayed: its header line (text or CSV) and binary trailer are framing, not rows. */
export class CopyOut {
  #headerPending: boolean;
  readonly #binary: boolean;

  /** `headerLine`: the statement asked for a header line; `response` the CopyOutResponse frame at `start`. */
  constructor(headerLine: boolean, response: Buffer, start: number) {
    this.#headerPending = headerLine;
    this.#binary = isBinaryCopy(response, start);
  }

  /** A CopyData was relayed without being looked at (a large row streamed through): the header is behind. */
  rowPassed(): void {
    this.#headerPending = false;
  }

  /** Whether the CopyData frame `buffer[start, end)` is the header line or the binary trailer. */
  isFraming(buffer: Buffer, start: number, end: number): boolean {
    if (this.#headerPending) {
      this.#headerPending = false;
      return true;
    }
    return this.#binary && isBinaryCopyTrailer(buffer, start, end);
  }
}
