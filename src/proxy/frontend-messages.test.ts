import { serialize } from "pg-protocol";
import { describe, expect, it } from "vitest";
import {
  assertEmptyPayload,
  decodeBind,
  decodeClose,
  decodeDescribe,
  decodeExecute,
  decodeFrontendMessage,
  decodeFunctionCall,
  decodeParse,
  decodeQuery,
  decodeSASLInitialResponse,
  ProtocolViolationError,
} from "./frontend-messages.js";

/** Frames written by node-postgres (an independent encoder): type byte and payload. */
const split = (message: Buffer): [number, Buffer] => [message[0]!, message.subarray(5)];
const body = (message: Buffer) => message.subarray(5);

const int16 = (n: number) => Buffer.from([(n >> 8) & 0xff, n & 0xff]);
const int32 = (n: number) => {
  const b = Buffer.alloc(4);
  b.writeInt32BE(n);
  return b;
};
const cstr = (s: string) => Buffer.from(`${s}\0`);

describe("frontend decoders on node-postgres output", () => {
  it("Query", () => {
    expect(decodeFrontendMessage(...split(serialize.query("SELECT * FROM t WHERE a = 'é'")))).toEqual({
      type: "query",
      sql: "SELECT * FROM t WHERE a = 'é'",
    });
  });

  it("Parse with parameter types", () => {
    expect(
      decodeParse(body(serialize.parse({ name: "s1", text: "SELECT $1, $2", types: [23, 4294967295] }))),
    ).toEqual({
      name: "s1",
      sql: "SELECT $1, $2",
      paramTypes: [23, 4294967295],
    });
  });

  it("Bind with text, binary and NULL parameters", () => {
    const message = serialize.bind({
      portal: "p",
      statement: "s1",
      values: ["42", null, Buffer.from([1, 2])],
      binary: true,
    });
    expect(decodeBind(body(message))).toEqual({
      portal: "p",
      statement: "s1",
      paramFormats: [0, 0, 1],
      params: [Buffer.from("42"), null, Buffer.from([1, 2])],
      resultFormats: [1],
    });
  });

  it("Describe, Close, Execute, Sync, Flush, Terminate, CopyDone, CopyFail", () => {
    expect(decodeFrontendMessage(...split(serialize.describe({ type: "S", name: "s1" })))).toEqual({
      type: "describe",
      kind: "S",
      name: "s1",
    });
    expect(decodeFrontendMessage(...split(serialize.close({ type: "P", name: "" })))).toEqual({
      type: "close",
      kind: "P",
      name: "",
    });
    expect(decodeFrontendMessage(...split(serialize.execute({ portal: "p", rows: 100 })))).toEqual({
      type: "execute",
      portal: "p",
      maxRows: 100,
    });
    expect(decodeFrontendMessage(...split(serialize.sync())).type).toBe("sync");
    expect(decodeFrontendMessage(...split(serialize.flush())).type).toBe("flush");
    expect(decodeFrontendMessage(...split(serialize.end())).type).toBe("terminate");
    expect(decodeFrontendMessage(...split(serialize.copyDone())).type).toBe("copyDone");
    expect(decodeFrontendMessage(...split(serialize.copyFail("client gave up")))).toEqual({
      type: "copyFail",
      message: "client gave up",
    });
  });

  it("SASLInitialResponse and the raw 'p' message", () => {
    const message = serialize.sendSASLInitialResponseMessage("SCRAM-SHA-256", "n,,n=*,r=abc");
    expect(decodeSASLInitialResponse(body(message))).toEqual({
      mechanism: "SCRAM-SHA-256",
      data: Buffer.from("n,,n=*,r=abc"),
    });
    expect(decodeFrontendMessage(...split(message))).toEqual({ type: "authResponse", data: body(message) });
    expect(decodeSASLInitialResponse(Buffer.concat([cstr("X"), int32(-1)]))).toEqual({
      mechanism: "X",
      data: null,
    });
  });
});

describe("frontend decoders on hand-built messages", () => {
  it("maps a non-positive Execute row limit to 0 (no limit)", () => {
    expect(decodeExecute(Buffer.concat([cstr(""), int32(-5)]))).toEqual({ portal: "", maxRows: 0 });
  });

  it("identifies a FunctionCall", () => {
    const call = Buffer.concat([
      int32(1598),
      int16(1),
      int16(0),
      int16(2),
      int32(1),
      Buffer.from("x"),
      int32(-1),
      int16(0),
    ]);
    expect(decodeFrontendMessage(0x46, call)).toEqual({ type: "functionCall", functionOid: 1598 });
  });

  it("accepts Bind with one format for all parameters and 65535-style unsigned counts", () => {
    const bind = Buffer.concat([
      cstr(""),
      cstr(""),
      int16(1),
      int16(1),
      int16(2),
      int32(0),
      int32(-1),
      int16(0),
    ]);
    expect(decodeBind(bind)).toMatchObject({
      paramFormats: [1],
      params: [Buffer.alloc(0), null],
      resultFormats: [],
    });
  });
});

describe("strings decode exactly", () => {
  it.each([
    ["empty", ""],
    ["ASCII", "SELECT 1"],
    ["non-ASCII", "SELECT 'Zürich', '東京', '🐘'"],
    ["long ASCII", `SELECT '${"a".repeat(5000)}'`],
    ["long non-ASCII", `SELECT '${"ü".repeat(3000)}'`],
  ])("%s", (_, sql) => {
    expect(decodeQuery(Buffer.from(`${sql}\0`))).toEqual({ sql });
  });
});

describe("frontend decoders reject malformed content with ProtocolViolationError", () => {
  const cases: [string, number, Buffer][] = [
    ["Query without NUL", 0x51, Buffer.from("SELECT 1")],
    ["Query with bytes after NUL", 0x51, Buffer.from("SELECT 1\0; DROP TABLE t\0")],
    ["Query with invalid UTF-8", 0x51, Buffer.from([0x53, 0xc3, 0x28, 0])],
    [
      "Query with invalid UTF-8 after a long ASCII prefix",
      0x51,
      Buffer.concat([Buffer.from(`SELECT '${"x".repeat(600)}`), Buffer.from([0xc3, 0x28, 0x27, 0])]),
    ],
    ["Query with a lone continuation byte", 0x51, Buffer.from([0x53, 0x80, 0])],
    ["Query with an overlong encoding", 0x51, Buffer.from([0x53, 0xc0, 0xaf, 0])],
    ["Parse with more types than bytes", 0x50, Buffer.concat([cstr(""), cstr("q"), int16(3), int32(23)])],
    ["Parse missing its count", 0x50, Buffer.concat([cstr(""), cstr("q")])],
    [
      "Bind with negative parameter length",
      0x42,
      Buffer.concat([cstr(""), cstr(""), int16(0), int16(1), int32(-2), int16(0)]),
    ],
    [
      "Bind with length past the end",
      0x42,
      Buffer.concat([cstr(""), cstr(""), int16(0), int16(1), int32(10), Buffer.from("ab"), int16(0)]),
    ],
    [
      "Bind with format/param mismatch",
      0x42,
      Buffer.concat([
        cstr(""),
        cstr(""),
        int16(2),
        int16(0),
        int16(0),
        int16(3),
        int32(-1),
        int32(-1),
        int32(-1),
        int16(0),
      ]),
    ],
    ["Bind with huge param count", 0x42, Buffer.concat([cstr(""), cstr(""), int16(0), int16(0xffff)])],
    ["Bind missing result formats", 0x42, Buffer.concat([cstr(""), cstr(""), int16(0), int16(0)])],
    ["Describe with bad kind", 0x44, Buffer.concat([Buffer.from("X"), cstr("n")])],
    ["Describe empty", 0x44, Buffer.alloc(0)],
    ["Close without name terminator", 0x43, Buffer.from("Sname")],
    ["Execute missing row limit", 0x45, cstr("p")],
    ["Sync with a body", 0x53, Buffer.from([0])],
    ["Terminate with a body", 0x58, Buffer.from("x")],
    ["CopyFail without NUL", 0x66, Buffer.from("oops")],
    ["FunctionCall truncated", 0x46, Buffer.concat([int32(1), int16(0), int16(1)])],
    ["unknown message type", 0x7a, Buffer.alloc(0)],
    ["startup-only type byte", 0x00, Buffer.alloc(0)],
  ];
  it.each(cases)("%s", (_name, code, payload) => {
    expect(() => decodeFrontendMessage(code, payload)).toThrow(ProtocolViolationError);
  });

  it("carries SQLSTATE 08P01 and a readable message", () => {
    try {
      decodeQuery(Buffer.from("x"));
      expect.unreachable();
    } catch (error) {
      expect(error).toBeInstanceOf(ProtocolViolationError);
      expect((error as ProtocolViolationError).sqlState).toBe("08P01");
      expect((error as Error).message).toMatch(/Query.*NUL/);
    }
  });

  it("rejects SASLInitialResponse data lengths other than -1 that are negative or too long", () => {
    expect(() => decodeSASLInitialResponse(Buffer.concat([cstr("M"), int32(-2)]))).toThrow(
      ProtocolViolationError,
    );
    expect(() => decodeSASLInitialResponse(Buffer.concat([cstr("M"), int32(5), Buffer.from("ab")]))).toThrow(
      ProtocolViolationError,
    );
  });

  it("direct decoders validate too", () => {
    expect(() => decodeDescribe(Buffer.from("P"))).toThrow(ProtocolViolationError);
    expect(() => decodeClose(Buffer.from("Sa\0b"))).toThrow(ProtocolViolationError);
    expect(() => decodeFunctionCall(Buffer.alloc(2))).toThrow(ProtocolViolationError);
    expect(() => assertEmptyPayload(Buffer.alloc(1), "Flush")).toThrow(ProtocolViolationError);
  });
});
