import { EventEmitter } from "node:events";
import type { Duplex } from "node:stream";
import { type ResultMemory, ResultMemoryFullError } from "./result-memory.js";

/** PGTOLL_MAX_ROW_BYTES's default: the largest row (or other message) pgtoll reads from a provider, 16 MiB. */
export const DEFAULT_MAX_ROW_BYTES = 16 * 1024 * 1024;

/** Type byte + int32 length of a protocol message. */
const HEADER_LENGTH = 5;
/** Messages from this size on are counted in the result memory while they are assembled: the rest are noise. */
const COUNTED_MESSAGE_BYTES = 64 * 1024;

/** A message from the provider's database longer than pgtoll reads (PGTOLL_MAX_ROW_BYTES): refused unread. */
export class OversizedMessageError extends Error {
  override name = "OversizedMessageError";

  constructor(
    /** The message's body, in bytes, as its length word announced it. */
    readonly bytes: number,
    readonly maxBytes: number,
  ) {
    super(`a message of ${bytes} bytes from the provider's database is above the limit of ${maxBytes} bytes`);
  }
}

/**
 * What node-postgres's parser reads instead of the connection's socket: the same chunks, each let through only
 * once the length words of the messages it starts are checked. node-postgres accumulates a whole message before
 * it parses it (and a value above V8's string limit throws inside the socket's 'data' handler, which nothing
 * catches): a message whose body is above `maxMessageBytes` is refused from its header instead, before any of
 * it is buffered, by destroying the socket with an {@link OversizedMessageError} (the running query fails with
 * it, and the pool drops the connection). Anything the parser or its listeners throw ends the connection the
 * same way, never the process. With `memory`, a message of 64 KiB or more is counted in it from its header to its
 * last byte (node-postgres holds it meanwhile); when the process holds its most, the connection is ended the same
 * way, with a {@link ResultMemoryFullError}.
 */
export function gatedMessages(stream: Duplex, maxMessageBytes: number, memory?: ResultMemory): EventEmitter {
  const gate = new EventEmitter();
  /** Bytes of the current message's body still to come. */
  let bodyLeft = 0;
  /** Bytes of the current message counted in `memory`, given back at its end. */
  let counted = 0;
  /** Bytes of a header split across chunks. */
  const header = Buffer.alloc(HEADER_LENGTH);
  let headerBytes = 0;
  let stopped = false;

  /** The first message of the chunk above a limit, or undefined. */
  const oversized = (chunk: Buffer): Error | undefined => {
    let offset = 0;
    while (offset < chunk.length) {
      if (bodyLeft > 0) {
        const take = Math.min(bodyLeft, chunk.length - offset);
        bodyLeft -= take;
        offset += take;
        continue;
      }
      if (counted > 0) {
        // The message before this one is complete: node-postgres parses it as this chunk is handed on.
        memory!.give(counted);
        counted = 0;
      }
      let length: number;
      if (headerBytes === 0 && chunk.length - offset >= HEADER_LENGTH) {
        length = chunk.readInt32BE(offset + 1);
        offset += HEADER_LENGTH;
      } else {
        const take = Math.min(HEADER_LENGTH - headerBytes, chunk.length - offset);
        chunk.copy(header, headerBytes, offset, offset + take);
        headerBytes += take;
        offset += take;
        if (headerBytes < HEADER_LENGTH) return undefined;
        headerBytes = 0;
        length = header.readInt32BE(1);
      }
      if (length - 4 > maxMessageBytes) return new OversizedMessageError(length - 4, maxMessageBytes);
      bodyLeft = length - 4;
      if (memory && bodyLeft >= COUNTED_MESSAGE_BYTES) {
        if (!memory.take(bodyLeft)) return new ResultMemoryFullError(memory.maxBytes);
        counted = bodyLeft;
      }
    }
    return undefined;
  };

  const stop = (error: Error) => {
    stopped = true;
    giveBack();
    stream.destroy(error);
  };
  const giveBack = () => {
    memory?.give(counted);
    counted = 0;
  };
  // A connection that ends inside a counted message gives it back.
  stream.on("close", giveBack);

  stream.on("data", (chunk: Buffer) => {
    if (stopped) return;
    const refused = oversized(chunk);
    if (refused) return stop(refused);
    try {
      gate.emit("data", chunk);
      // The chunk ended the counted message: node-postgres has it parsed into its row.
      if (bodyLeft === 0 && counted > 0) giveBack();
    } catch (error) {
      stop(error instanceof Error ? error : new Error(String(error)));
    }
  });
  stream.on("end", () => gate.emit("end"));
  return gate;
}
