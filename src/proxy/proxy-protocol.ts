import { isIP } from "node:net";
import { canonicalAddress } from "../net/canonical-address.js";

/**
 * The PROXY protocol header a TCP load balancer (HAProxy `send-proxy`/`send-proxy-v2`, cloud balancers) puts
 * in front of a connection's first byte, so the server learns the real client's address. Both versions:
 * v1 is one text line, v2 a binary block. Specification: haproxy.org/download/2.9/doc/proxy-protocol.txt.
 * Addresses are given in their canonical spelling (canonicalAddress: an IPv4-mapped address is the IPv4 one).
 */
export type ProxyHeader =
  | {
      version: 1 | 2;
      command: "proxy";
      source: { address: string; port: number };
      destination: { address: string; port: number };
    }
  /** v1 UNKNOWN, v2 LOCAL (the balancer's own health check), or an address family we do not use (UNIX). */
  | { version: 1 | 2; command: "local" };

/** What the first bytes of a connection say so far; `length` is the header's, the bytes after it are the client's. */
export type ProxyHeaderRead =
  | { kind: "incomplete" }
  | { kind: "absent" }
  | { kind: "header"; header: ProxyHeader; length: number };

/** The bytes are a PROXY header, but not a valid one: the connection is to be closed. */
export class ProxyHeaderError extends Error {
  override name = "ProxyHeaderError";
}

const V1_PREFIX = Buffer.from("PROXY ", "latin1");
/** A v1 line is at most 107 bytes, CRLF included. */
export const V1_MAX_LENGTH = 107;
const V2_SIGNATURE = Buffer.from([0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d, 0x0a, 0x51, 0x55, 0x49, 0x54, 0x0a]);
const V2_FIXED = 16;
/** The most address and TLV bytes a v2 header may carry here (the format allows 65 535). */
export const V2_MAX_PAYLOAD = 4096;

/** Whether `buffer` begins as `prefix` does, as far as both go. */
function startsAs(buffer: Buffer, prefix: Buffer): boolean {
  const n = Math.min(buffer.length, prefix.length);
  return buffer.subarray(0, n).equals(prefix.subarray(0, n));
}

/** Whether the bytes begin (or may begin, when short) a PROXY header of either version. */
export function startsLikeProxyHeader(buffer: Buffer): boolean {
  return buffer.length > 0 && (startsAs(buffer, V1_PREFIX) || startsAs(buffer, V2_SIGNATURE));
}

/**
 * Reads a PROXY header from the start of `buffer` (everything received so far). Never reads past
 * {@link V1_MAX_LENGTH} or 16 + {@link V2_MAX_PAYLOAD} bytes; throws {@link ProxyHeaderError} on a bad header.
 */
export function readProxyHeader(buffer: Buffer): ProxyHeaderRead {
  if (buffer.length === 0) return { kind: "incomplete" };
  if (startsAs(buffer, V2_SIGNATURE))
    return buffer.length < V2_SIGNATURE.length ? { kind: "incomplete" } : readV2(buffer);
  if (startsAs(buffer, V1_PREFIX))
    return buffer.length < V1_PREFIX.length ? { kind: "incomplete" } : readV1(buffer);
  return { kind: "absent" };
}

function readV1(buffer: Buffer): ProxyHeaderRead {
  const end = buffer.subarray(0, V1_MAX_LENGTH).indexOf("\r\n");
  if (end < 0) {
    if (buffer.length >= V1_MAX_LENGTH) throw new ProxyHeaderError("PROXY v1 line longer than 107 bytes");
    return { kind: "incomplete" };
  }
  const line = buffer.toString("latin1", 0, end);
  const length = end + 2;
  const [, protocol, ...rest] = line.split(" ");
  if (protocol === "UNKNOWN") return { kind: "header", header: { version: 1, command: "local" }, length };
  if (protocol !== "TCP4" && protocol !== "TCP6")
    throw new ProxyHeaderError(`PROXY v1 protocol "${protocol}" is not TCP4, TCP6 or UNKNOWN`);
  const family = protocol === "TCP4" ? 4 : 6;
  const [source, destination, sourcePort, destinationPort] = rest;
  if (rest.length !== 4 || isIP(source ?? "") !== family || isIP(destination ?? "") !== family)
    throw new ProxyHeaderError(`PROXY v1 line has no valid ${protocol} addresses`);
  return {
    kind: "header",
    header: {
      version: 1,
      command: "proxy",
      source: { address: canonicalAddress(source!), port: v1Port(sourcePort) },
      destination: { address: canonicalAddress(destination!), port: v1Port(destinationPort) },
    },
    length,
  };
}

function v1Port(text: string | undefined): number {
  if (!text || !/^(0|[1-9]\d{0,4})$/.test(text) || Number(text) > 65535)
    throw new ProxyHeaderError(`PROXY v1 port "${text}" is not a port number`);
  return Number(text);
}

function readV2(buffer: Buffer): ProxyHeaderRead {
  if (buffer.length < V2_FIXED) return { kind: "incomplete" };
  const versionCommand = buffer[12]!;
  if (versionCommand >> 4 !== 2) throw new ProxyHeaderError(`PROXY v2 version ${versionCommand >> 4}`);
  const command = versionCommand & 0x0f;
  if (command > 1) throw new ProxyHeaderError(`PROXY v2 command ${command} is neither LOCAL nor PROXY`);
  const payload = buffer.readUInt16BE(14);
  if (payload > V2_MAX_PAYLOAD)
    throw new ProxyHeaderError(`PROXY v2 header of ${payload} bytes is over ${V2_MAX_PAYLOAD}`);
  const length = V2_FIXED + payload;
  if (buffer.length < length) return { kind: "incomplete" };
  const family = buffer[13]! >> 4;
  // LOCAL carries no client; PROXY over an unspecified or UNIX family tells nothing this server can use.
  if (command === 0 || family === 0 || family === 3)
    return { kind: "header", header: { version: 2, command: "local" }, length };
  const size = family === 1 ? 4 : family === 2 ? 16 : 0;
  if (size === 0) throw new ProxyHeaderError(`PROXY v2 address family ${family}`);
  if (payload < 2 * size + 4)
    throw new ProxyHeaderError(`PROXY v2 header of ${payload} bytes is too short for its addresses`);
  const at = V2_FIXED;
  // What follows the addresses (TLVs: ALPN, TLS details, cloud ids) is skipped.
  return {
    kind: "header",
    header: {
      version: 2,
      command: "proxy",
      source: { address: v2Address(buffer, at, size), port: buffer.readUInt16BE(at + 2 * size) },
      destination: {
        address: v2Address(buffer, at + size, size),
        port: buffer.readUInt16BE(at + 2 * size + 2),
      },
    },
    length,
  };
}

function v2Address(buffer: Buffer, at: number, size: number): string {
  if (size === 4) return [...buffer.subarray(at, at + 4)].join(".");
  const groups: string[] = [];
  for (let i = 0; i < 16; i += 2) groups.push(buffer.readUInt16BE(at + i).toString(16));
  // A dual-stack balancer gives an IPv4 client as an IPv4-mapped IPv6 address: that is the IPv4 address.
  return canonicalAddress(groups.join(":"));
}
