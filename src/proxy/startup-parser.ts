import { isUtf8 } from "node:buffer";
import { StartupCode } from "./message-codes.js";
import { startsLikeProxyHeader } from "./proxy-protocol.js";

/** The `malformed` reason of a connection that opens with a PROXY protocol header nobody asked for. */
export const UNTRUSTED_PROXY_HEADER = "a PROXY protocol header from a peer not in PGTOLL_TRUSTED_PROXIES";

/** PostgreSQL refuses longer startup packets (MAX_STARTUP_PACKET_LENGTH). */
export const MAX_STARTUP_PACKET_LENGTH = 10000;

/** A secret key is 4 bytes in protocol 3.0 and up to 256 bytes from 3.2 on. */
const MAX_CANCEL_KEY_LENGTH = 256;

/** First byte of a TLS record: a client using `sslnegotiation=direct` starts with a ClientHello. */
const TLS_HANDSHAKE_RECORD = 0x16;

export interface ProtocolVersion {
  major: number;
  minor: number;
}

/** What one untyped startup-phase packet turned out to be. `rest` holds any bytes after it. */
export type StartupPacket =
  | { kind: "incomplete" }
  | { kind: "sslRequest"; rest: Buffer }
  | { kind: "gssencRequest"; rest: Buffer }
  /** The stream opens with a TLS handshake (PostgreSQL 17 direct SSL); nothing was consumed. */
  | { kind: "tlsHandshake"; rest: Buffer }
  | { kind: "cancelRequest"; processId: number; secretKey: Buffer; rest: Buffer }
  | {
      kind: "startup";
      /** Major is always 3; a minor above 0 asks for a newer 3.x (answer NegotiateProtocolVersion). */
      protocol: ProtocolVersion;
      /** Ordinary parameters (user, database, options, replication, application_name, GUCs...). */
      params: Record<string, string>;
      /** `_pq_.*` protocol extension options, kept apart because they must be negotiated. */
      protocolOptions: Record<string, string>;
      rest: Buffer;
    }
  /** Not 3.x and not a known special code: report it in an ErrorResponse, then close. */
  | { kind: "unsupportedProtocol"; protocol: ProtocolVersion; rest: Buffer }
  /** A 3.x StartupMessage whose parameters are not laid out right: PostgreSQL answers it (FATAL 08P01). */
  | { kind: "badLayout"; reason: string }
  /** Not a startup packet at all (a bad length word, say): PostgreSQL only logs it and closes without a word. */
  | { kind: "malformed"; reason: string };

const incomplete: StartupPacket = { kind: "incomplete" };

/**
 * Reads the first packet of `buffer` (packets before the first typed message have no type byte:
 * int32 length, int32 code, body). Never throws on bad input: a peer that sends garbage gets a
 * `malformed` result, which PostgreSQL answers by closing the connection without a word.
 *
 * Warning: after `sslRequest`/`gssencRequest`, a non-empty `rest` means the client sent bytes before
 * the encryption handshake; treat them as an attack (CVE-2021-23214) and close, do not parse them.
 */
export function parseStartupPacket(buffer: Buffer): StartupPacket {
  if (buffer.length === 0) return incomplete;
  if (buffer[0] === TLS_HANDSHAKE_RECORD) return { kind: "tlsHandshake", rest: buffer };
  if (buffer.length < 4) return incomplete;
  const length = buffer.readInt32BE(0);
  if (length < 8 || length > MAX_STARTUP_PACKET_LENGTH) {
    if (startsLikeProxyHeader(buffer)) return { kind: "malformed", reason: UNTRUSTED_PROXY_HEADER };
    return { kind: "malformed", reason: `invalid length of startup packet: ${length}` };
  }
  if (buffer.length < 8) return incomplete;
  const code = buffer.readInt32BE(4);
  // Special requests are recognised (and their length checked) before the whole packet arrives,
  // so a client cannot park a half-sent SSLRequest on us.
  switch (code) {
    case StartupCode.SSLRequest:
    case StartupCode.GSSENCRequest:
      if (length !== 8)
        return { kind: "malformed", reason: `invalid length ${length} of encryption request` };
      return {
        kind: code === StartupCode.SSLRequest ? "sslRequest" : "gssencRequest",
        rest: buffer.subarray(8),
      };
    case StartupCode.CancelRequest: {
      const keyLength = length - 12;
      if (keyLength < 4 || keyLength > MAX_CANCEL_KEY_LENGTH) {
        return { kind: "malformed", reason: `invalid length ${length} of cancel request` };
      }
      if (buffer.length < length) return incomplete;
      return {
        kind: "cancelRequest",
        processId: buffer.readInt32BE(8),
        // A copy: the key outlives the socket chunk it came in.
        secretKey: Buffer.from(buffer.subarray(12, length)),
        rest: buffer.subarray(length),
      };
    }
  }
  if (buffer.length < length) return incomplete;
  const protocol = { major: code >>> 16, minor: code & 0xffff };
  const rest = buffer.subarray(length);
  if (protocol.major !== 3) return { kind: "unsupportedProtocol", protocol, rest };
  return parseStartupParams(buffer.subarray(8, length), protocol, rest);
}

function parseStartupParams(body: Buffer, protocol: ProtocolVersion, rest: Buffer): StartupPacket {
  const params: Record<string, string> = Object.create(null);
  const protocolOptions: Record<string, string> = Object.create(null);
  let offset = 0;
  // name\0value\0 ... \0 — the single terminator must be the very last byte.
  while (offset < body.length && body[offset] !== 0) {
    const nameEnd = body.indexOf(0, offset);
    const valueEnd = nameEnd < 0 ? -1 : body.indexOf(0, nameEnd + 1);
    if (valueEnd < 0) return { kind: "badLayout", reason: "startup packet parameter is not NUL-terminated" };
    if (!isUtf8(body.subarray(offset, valueEnd))) {
      return { kind: "badLayout", reason: "startup packet parameter is not valid UTF-8" };
    }
    const name = body.toString("utf8", offset, nameEnd);
    const value = body.toString("utf8", nameEnd + 1, valueEnd);
    if (name.startsWith("_pq_.")) protocolOptions[name] = value;
    else params[name] = value;
    offset = valueEnd + 1;
  }
  if (offset !== body.length - 1) {
    return { kind: "badLayout", reason: "invalid startup packet layout: expected terminator as last byte" };
  }
  return { kind: "startup", protocol, params, protocolOptions, rest };
}

/**
 * Accumulates socket chunks until {@link parseStartupPacket} has a verdict. Bytes are copied only
 * while a packet is incomplete (startup packets are at most 10000 bytes).
 */
export class StartupReader {
  private pending: Buffer | undefined;

  /** Feeds a chunk; returns `incomplete` until one packet is decided, then resets itself. */
  feed(chunk: Buffer): StartupPacket {
    const buffer = this.pending ? Buffer.concat([this.pending, chunk]) : chunk;
    const packet = parseStartupPacket(buffer);
    // Keep our own copy: the caller may recycle its chunk. A concat result is already ours.
    this.pending = packet.kind !== "incomplete" ? undefined : this.pending ? buffer : Buffer.from(chunk);
    return packet;
  }
}
