import { FRAME_HEADER_LENGTH, type Frame } from "./frame-reader.js";
import { ProtocolViolationError } from "./protocol-violation-error.js";

/** What the next authentication message must be. */
export interface ExpectedMessage {
  /** Its type byte (every client message during authentication is a PasswordMessage, 'p'). */
  code: number;
  /** Longest body accepted: the bytes after the length word. */
  maxBodyLength: number;
  /** How an error names it ("password message", "SASL response"). */
  name: string;
}

/**
 * Holds what a client sent after its StartupMessage and takes the authentication messages out of it one at a
 * time. A message of the wrong type or length is refused from its 5-byte header, before its body arrives, so a
 * client cannot make the proxy hold more than one message's cap (and one socket chunk) before it logs in.
 */
export class AuthMessageReader {
  #buffered = Buffer.alloc(0);

  /** Keeps a copy of `chunk`: the caller may reuse it. */
  feed(chunk: Buffer): void {
    this.#buffered =
      this.#buffered.length === 0 ? Buffer.from(chunk) : Buffer.concat([this.#buffered, chunk]);
  }

  /**
   * Takes the next message when it is complete; undefined while bytes are missing.
   * @throws ProtocolViolationError when its header shows the wrong type or a length out of bounds
   */
  take(expected: ExpectedMessage): Frame | undefined {
    const buffered = this.#buffered;
    if (buffered.length < FRAME_HEADER_LENGTH) return undefined;
    const code = buffered[0]!;
    const length = buffered.readInt32BE(1);
    if (code !== expected.code)
      throw new ProtocolViolationError(
        `expected ${expected.name}, got message type ${JSON.stringify(String.fromCharCode(code))}`,
      );
    if (length < 4) throw new ProtocolViolationError(`invalid message length ${length} for ${expected.name}`);
    if (length - 4 > expected.maxBodyLength)
      throw new ProtocolViolationError(
        `${expected.name} of ${length - 4} bytes exceeds the limit of ${expected.maxBodyLength}`,
      );
    const end = 1 + length;
    if (buffered.length < end) return undefined;
    this.#buffered = buffered.subarray(end);
    const frame = buffered.subarray(0, end);
    return { code, frame, payload: frame.subarray(FRAME_HEADER_LENGTH) };
  }

  /** The bytes after the last message taken: what the client sent past its authentication. */
  rest(): Buffer {
    return this.#buffered;
  }
}
