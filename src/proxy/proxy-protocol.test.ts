import { describe, expect, it } from "vitest";
import {
  ProxyHeaderError,
  readProxyHeader,
  startsLikeProxyHeader,
  V1_MAX_LENGTH,
  V2_MAX_PAYLOAD,
} from "./proxy-protocol.js";

const SIGNATURE = Buffer.from("0d0a0d0a000d0a515549540a", "hex");
/** The start of a PostgreSQL SSLRequest: what a client sends when no balancer is in between. */
const CLIENT_BYTES = Buffer.from([0, 0, 0, 8, 4, 0xd2, 0x16, 0x2f]);

function v2(command: number, family: number, body: Buffer, tlvs = Buffer.alloc(0)): Buffer {
  const fixed = Buffer.alloc(4);
  fixed[0] = 0x20 | command;
  fixed[1] = (family << 4) | 1;
  fixed.writeUInt16BE(body.length + tlvs.length, 2);
  return Buffer.concat([SIGNATURE, fixed, body, tlvs]);
}

function inet4(source: number[], destination: number[], ports: [number, number]): Buffer {
  const body = Buffer.alloc(12);
  Buffer.from(source).copy(body, 0);
  Buffer.from(destination).copy(body, 4);
  body.writeUInt16BE(ports[0], 8);
  body.writeUInt16BE(ports[1], 10);
  return body;
}

function inet6(source: string, destination: string, ports: [number, number]): Buffer {
  const body = Buffer.alloc(36);
  Buffer.from(source, "hex").copy(body, 0);
  Buffer.from(destination, "hex").copy(body, 16);
  body.writeUInt16BE(ports[0], 32);
  body.writeUInt16BE(ports[1], 34);
  return body;
}

const tlv = Buffer.from([0x01, 0x00, 0x02, 0x68, 0x32, 0x04, 0x00, 0x03, 0x61, 0x62, 0x63]);

const valid: [string, Buffer, unknown][] = [
  [
    "v1 TCP4",
    Buffer.from("PROXY TCP4 203.0.113.7 10.0.0.2 51234 6543\r\n"),
    { version: 1, command: "proxy", source: { address: "203.0.113.7", port: 51234 } },
  ],
  [
    "v1 TCP6",
    Buffer.from("PROXY TCP6 2001:db8::7 2001:db8::2 51234 6543\r\n"),
    { version: 1, command: "proxy", source: { address: "2001:db8::7", port: 51234 } },
  ],
  ["v1 UNKNOWN", Buffer.from("PROXY UNKNOWN ff ee\r\n"), { version: 1, command: "local" }],
  [
    "v2 PROXY IPv4",
    v2(1, 1, inet4([198, 51, 100, 9], [10, 0, 0, 2], [40000, 6543])),
    {
      version: 2,
      command: "proxy",
      source: { address: "198.51.100.9", port: 40000 },
      destination: { address: "10.0.0.2", port: 6543 },
    },
  ],
  [
    "v2 PROXY IPv6 with TLVs",
    v2(1, 2, inet6("20010db8000000000000000000000007", "20010db8000000000000000000000002", [1, 2]), tlv),
    { version: 2, command: "proxy", source: { address: "2001:db8::7", port: 1 } },
  ],
  [
    // HAProxy `bind :::port v4v6` + `send-proxy-v2` gives an IPv4 client so.
    "v2 PROXY IPv6 carrying IPv4-mapped addresses",
    v2(1, 2, inet6("00000000000000000000ffffc6336409", "00000000000000000000ffff0a000002", [40000, 6543])),
    {
      version: 2,
      command: "proxy",
      source: { address: "198.51.100.9", port: 40000 },
      destination: { address: "10.0.0.2", port: 6543 },
    },
  ],
  [
    "v1 TCP6 carrying IPv4-mapped addresses, in either spelling",
    Buffer.from("PROXY TCP6 ::ffff:198.51.100.9 ::FFFF:a00:2 51234 6543\r\n"),
    {
      version: 1,
      command: "proxy",
      source: { address: "198.51.100.9", port: 51234 },
      destination: { address: "10.0.0.2", port: 6543 },
    },
  ],
  ["v2 LOCAL", v2(0, 0, Buffer.alloc(0)), { version: 2, command: "local" }],
  ["v2 LOCAL with addresses", v2(0, 1, inet4([1, 2, 3, 4], [5, 6, 7, 8], [1, 2])), { command: "local" }],
];

describe("PROXY protocol headers", () => {
  it.each(valid)("reads %s and leaves the client's bytes after it", (_name, header, expected) => {
    const read = readProxyHeader(Buffer.concat([header, CLIENT_BYTES]));
    expect(read).toMatchObject({ kind: "header", header: expected, length: header.length });
  });

  it.each(valid)("reads %s split at every byte: front, middle and end", (_name, header, expected) => {
    const whole = Buffer.concat([header, CLIENT_BYTES]);
    for (let split = 1; split < header.length; split++) {
      expect(readProxyHeader(whole.subarray(0, split)), `split at ${split}`).toEqual({ kind: "incomplete" });
      expect(readProxyHeader(Buffer.concat([whole.subarray(0, split), whole.subarray(split)]))).toMatchObject(
        {
          kind: "header",
          header: expected,
          length: header.length,
        },
      );
    }
  });

  it("says absent for a PostgreSQL client's first bytes, even one byte of them", () => {
    expect(readProxyHeader(CLIENT_BYTES)).toEqual({ kind: "absent" });
    expect(readProxyHeader(CLIENT_BYTES.subarray(0, 1))).toEqual({ kind: "absent" });
    expect(readProxyHeader(Buffer.from("PROXZ"))).toEqual({ kind: "absent" });
    expect(startsLikeProxyHeader(CLIENT_BYTES)).toBe(false);
    expect(startsLikeProxyHeader(Buffer.from("PROX"))).toBe(true);
    expect(startsLikeProxyHeader(SIGNATURE.subarray(0, 3))).toBe(true);
  });

  it.each([
    ["a v1 line with no end", Buffer.from(`PROXY TCP4 ${"1".repeat(V1_MAX_LENGTH)}`)],
    ["a v1 line of another protocol", Buffer.from("PROXY UDP4 1.2.3.4 5.6.7.8 1 2\r\n")],
    ["v1 TCP4 with IPv6 addresses", Buffer.from("PROXY TCP4 ::1 ::1 1 2\r\n")],
    ["a v1 port out of range", Buffer.from("PROXY TCP4 1.2.3.4 5.6.7.8 65536 2\r\n")],
    ["a v1 port with a sign", Buffer.from("PROXY TCP4 1.2.3.4 5.6.7.8 +1 2\r\n")],
    ["a v1 line missing its ports", Buffer.from("PROXY TCP4 1.2.3.4 5.6.7.8\r\n")],
    ["v2 version 3", Buffer.concat([SIGNATURE, Buffer.from([0x31, 0x11, 0, 0])])],
    ["a v2 command 2", Buffer.concat([SIGNATURE, Buffer.from([0x22, 0x11, 0, 0])])],
    ["a v2 header over the bound", Buffer.concat([SIGNATURE, Buffer.from([0x21, 0x11, 0x10, 0x01])])],
    ["v2 IPv4 too short", v2(1, 1, Buffer.alloc(8))],
    ["a v2 family 4", v2(1, 4, Buffer.alloc(12))],
  ])("refuses %s", (_name, bytes) => {
    expect(() => readProxyHeader(bytes)).toThrow(ProxyHeaderError);
  });

  it("never waits past its bounds", () => {
    // The largest v2 header allowed is read whole; a v1 line is refused once 107 bytes hold no CRLF.
    const largest = v2(1, 1, inet4([1, 2, 3, 4], [5, 6, 7, 8], [1, 2]), Buffer.alloc(V2_MAX_PAYLOAD - 12));
    expect(readProxyHeader(largest)).toMatchObject({ kind: "header", length: 16 + V2_MAX_PAYLOAD });
    expect(readProxyHeader(Buffer.from(`PROXY UNKNOWN ${"x".repeat(V1_MAX_LENGTH - 16)}`))).toEqual({
      kind: "incomplete",
    });
    expect(() => readProxyHeader(Buffer.from(`PROXY UNKNOWN ${"x".repeat(V1_MAX_LENGTH)}`))).toThrow(
      ProxyHeaderError,
    );
  });
});
