/**
 * Writes one message into a buffer allocated once at its exact size (small sizes come from Node's
 * shared pool, so this is cheap). Encoders measure first, then write: no growth, no final copy.
 * Every byte is written, which is what makes `allocUnsafe` safe here; `finish` checks it.
 */
export class MessageWriter {
  readonly buffer: Buffer;
  private offset = 0;

  /** A typed message: writes the type byte and the length word for a body of `bodyLength` bytes. */
  static typed(code: number, bodyLength: number): MessageWriter {
    const writer = new MessageWriter(1 + 4 + bodyLength);
    writer.byte(code);
    writer.int32(4 + bodyLength);
    return writer;
  }

  /** An untyped startup-phase packet: writes the length word only. */
  static untyped(bodyLength: number): MessageWriter {
    const writer = new MessageWriter(4 + bodyLength);
    writer.int32(4 + bodyLength);
    return writer;
  }

  private constructor(size: number) {
    this.buffer = Buffer.allocUnsafe(size);
  }

  byte(value: number): this {
    this.buffer[this.offset++] = value;
    return this;
  }

  int16(value: number): this {
    this.offset = this.buffer.writeInt16BE(value, this.offset);
    return this;
  }

  int32(value: number): this {
    this.offset = this.buffer.writeInt32BE(value, this.offset);
    return this;
  }

  uint32(value: number): this {
    this.offset = this.buffer.writeUInt32BE(value, this.offset);
    return this;
  }

  /** Writes `value` and its NUL; `byteLength` must be what {@link cstringLength} returned. */
  cstring(value: string, byteLength: number): this {
    this.offset += this.buffer.write(value, this.offset, byteLength - 1, "utf8");
    this.buffer[this.offset++] = 0;
    return this;
  }

  bytes(value: Uint8Array): this {
    this.buffer.set(value, this.offset);
    this.offset += value.length;
    return this;
  }

  finish(): Buffer {
    if (this.offset !== this.buffer.length) {
      throw new Error(`message writer filled ${this.offset} of ${this.buffer.length} bytes`);
    }
    return this.buffer;
  }
}

/**
 * Encoded size of a C string, terminator included.
 * @throws RangeError if `value` contains NUL: it would end the string early and let the rest be
 *   read as further fields (an injection into the peer's parser)
 */
export function cstringLength(value: string, field: string): number {
  if (value.includes("\0")) throw new RangeError(`${field} must not contain a NUL character`);
  return Buffer.byteLength(value, "utf8") + 1;
}
