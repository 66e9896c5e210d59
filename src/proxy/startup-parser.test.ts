import { describe, expect, it } from "vitest";
import { encodeCancelRequest, encodeStartupMessage } from "./serializer.js";
import {
  MAX_STARTUP_PACKET_LENGTH,
  parseStartupPacket,
  type StartupPacket,
  StartupReader,
} from "./startup-parser.js";

const packet = (code: number, body: Buffer = Buffer.alloc(0), length = 8 + body.length): Buffer => {
  const head = Buffer.alloc(8);
  head.writeInt32BE(length, 0);
  head.writeInt32BE(code, 4);
  return Buffer.concat([head, body]);
};

/** Feeds `bytes` to a fresh reader one byte at a time; returns every non-incomplete result. */
function feedBytewise(bytes: Buffer): StartupPacket[] {
  const reader = new StartupReader();
  const results: StartupPacket[] = [];
  for (const byte of bytes) {
    const result = reader.feed(Buffer.from([byte]));
    if (result.kind !== "incomplete") results.push(result);
  }
  return results;
}

describe("parseStartupPacket", () => {
  it("recognises SSLRequest and GSSENCRequest", () => {
    expect(parseStartupPacket(packet(80877103))).toEqual({ kind: "sslRequest", rest: Buffer.alloc(0) });
    expect(parseStartupPacket(packet(80877104))).toEqual({ kind: "gssencRequest", rest: Buffer.alloc(0) });
  });

  it("hands back bytes sent after an SSLRequest so the caller can refuse them", () => {
    const result = parseStartupPacket(Buffer.concat([packet(80877103), Buffer.from("Q")]));
    expect(result).toEqual({ kind: "sslRequest", rest: Buffer.from("Q") });
  });

  it("decodes a CancelRequest with a 4-byte and a longer (3.2) key", () => {
    expect(parseStartupPacket(encodeCancelRequest(4242, -559038737))).toEqual({
      kind: "cancelRequest",
      processId: 4242,
      secretKey: Buffer.from("deadbeef", "hex"),
      rest: Buffer.alloc(0),
    });
    const long = Buffer.alloc(32, 7);
    const result = parseStartupPacket(encodeCancelRequest(1, long));
    expect(result.kind === "cancelRequest" && result.secretKey.equals(long)).toBe(true);
  });

  it("decodes a StartupMessage with its parameters, keeping _pq_ options apart", () => {
    const params = {
      user: "agent",
      database: "shop",
      options: "-c search_path=app",
      replication: "database",
      application_name: "psql ✓",
      "_pq_.example": "on",
    };
    const result = parseStartupPacket(encodeStartupMessage(params, 196610));
    expect(result).toEqual({
      kind: "startup",
      protocol: { major: 3, minor: 2 },
      params: {
        user: "agent",
        database: "shop",
        options: "-c search_path=app",
        replication: "database",
        application_name: "psql ✓",
      },
      protocolOptions: { "_pq_.example": "on" },
      rest: Buffer.alloc(0),
    });
  });

  it("reports v2 and v4 protocol versions as unsupported with major and minor", () => {
    expect(parseStartupPacket(packet(0x20000, Buffer.from([0])))).toMatchObject({
      kind: "unsupportedProtocol",
      protocol: { major: 2, minor: 0 },
    });
    expect(parseStartupPacket(packet(0x40001, Buffer.from([0])))).toMatchObject({
      kind: "unsupportedProtocol",
      protocol: { major: 4, minor: 1 },
    });
  });

  it("recognises a direct TLS ClientHello", () => {
    expect(parseStartupPacket(Buffer.from([0x16, 0x03, 0x01]))).toMatchObject({ kind: "tlsHandshake" });
  });

  it.each([
    ["length below 8", packet(196608, Buffer.alloc(0), 7)],
    ["negative length", packet(196608, Buffer.alloc(0), -5)],
    ["length above 10000", packet(196608, Buffer.alloc(0), MAX_STARTUP_PACKET_LENGTH + 1)],
    ["SSLRequest with a body", packet(80877103, Buffer.alloc(4))],
    ["cancel key too short", packet(80877102, Buffer.alloc(6))],
    ["Terminate", Buffer.from([0x58, 0, 0, 0, 4])],
  ])("calls %s malformed (not a startup packet)", (_name, bytes) => {
    expect(parseStartupPacket(bytes).kind).toBe("malformed");
  });

  it.each([
    ["parameters without terminator", packet(196608, Buffer.from("user\0bob\0"))],
    ["value missing its NUL", packet(196608, Buffer.from("user\0bob"))],
    ["bytes after the terminator", packet(196608, Buffer.from("user\0bob\0\0x"))],
    ["empty body", packet(196608)],
    ["invalid UTF-8", packet(196608, Buffer.from([0x75, 0, 0xff, 0, 0]))],
  ])("calls %s a bad layout", (_name, bytes) => {
    expect(parseStartupPacket(bytes).kind).toBe("badLayout");
  });

  it("rejects a bad length from the first 4 bytes, before the rest arrives", () => {
    expect(parseStartupPacket(Buffer.from([0, 0, 0x7f, 0xff])).kind).toBe("malformed");
  });

  it("accepts a startup packet with no parameters but the terminator", () => {
    expect(parseStartupPacket(packet(196608, Buffer.from([0])))).toMatchObject({
      kind: "startup",
      params: {},
    });
  });

  it("waits for truncated packets", () => {
    const full = encodeStartupMessage({ user: "u" });
    for (let cut = 0; cut < full.length; cut++) {
      expect(parseStartupPacket(full.subarray(0, cut)).kind).toBe("incomplete");
    }
  });
});

describe("StartupReader", () => {
  it("assembles a startup packet fed byte by byte and returns the bytes after it", () => {
    const startup = encodeStartupMessage({ user: "u", database: "d" });
    const results = feedBytewise(startup);
    expect(results).toHaveLength(1);
    expect(results[0]).toMatchObject({ kind: "startup", params: { user: "u", database: "d" } });

    const reader = new StartupReader();
    reader.feed(startup.subarray(0, 10));
    const result = reader.feed(Buffer.concat([startup.subarray(10), Buffer.from("XYZ")]));
    expect(result.kind === "startup" && result.rest.toString()).toBe("XYZ");
  });

  it("is reusable after a verdict (SSLRequest then, over TLS, the startup packet)", () => {
    const reader = new StartupReader();
    expect(reader.feed(packet(80877103)).kind).toBe("sslRequest");
    expect(reader.feed(encodeStartupMessage({ user: "u" })).kind).toBe("startup");
  });

  it("does not depend on the caller keeping its chunk intact", () => {
    const reader = new StartupReader();
    const startup = encodeStartupMessage({ user: "alice" });
    const chunk = Buffer.from(startup.subarray(0, 12));
    reader.feed(chunk);
    chunk.fill(0);
    expect(reader.feed(startup.subarray(12))).toMatchObject({ kind: "startup", params: { user: "alice" } });
  });
});
