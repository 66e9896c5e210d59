import type { BackendMessage } from "pg-protocol/dist/messages.js";
import { Parser } from "pg-protocol/dist/parser.js";
import { describe, expect, it } from "vitest";
import {
  dataRowByteLength,
  decodeAuthentication,
  decodeBackendKeyData,
  decodeCommandComplete,
  decodeCopyResponse,
  decodeDataRow,
  decodeNoticeFields,
  decodeReadyForQuery,
  decodeRowDescription,
  parseCommandTag,
  readyForQueryStatusOf,
  writeCountOf,
} from "./backend-messages.js";
import { ProtocolViolationError } from "./protocol-violation-error.js";
import * as encode from "./serializer.js";

const int16 = (n: number) => Buffer.from([(n >> 8) & 0xff, n & 0xff]);
const int32 = (n: number) => {
  const b = Buffer.alloc(4);
  b.writeInt32BE(n);
  return b;
};

describe("parseCommandTag", () => {
  it.each([
    ["INSERT 0 5", "INSERT", 5],
    ["INSERT 16384 1", "INSERT", 1],
    ["SELECT 3", "SELECT", 3],
    ["SELECT 0", "SELECT", 0],
    ["UPDATE 2", "UPDATE", 2],
    ["DELETE 1", "DELETE", 1],
    ["MERGE 4", "MERGE", 4],
    ["COPY 10", "COPY", 10],
    ["FETCH 5", "FETCH", 5],
    ["MOVE 3", "MOVE", 3],
    ["CREATE TABLE", "CREATE TABLE", null],
    ["SET", "SET", null],
    ["BEGIN", "BEGIN", null],
    ["INSERT 5", "INSERT 5", null],
    ["DROP TABLE 5", "DROP TABLE 5", null],
    ["SELECT x", "SELECT x", null],
    ["", "", null],
  ])("%j", (tag, command, rows) => {
    expect(parseCommandTag(tag)).toEqual({ command, rows });
  });

  it("decodes the CommandComplete payload", () => {
    expect(decodeCommandComplete(Buffer.from("UPDATE 7\0"))).toEqual({
      tag: "UPDATE 7",
      command: "UPDATE",
      rows: 7,
    });
    expect(() => decodeCommandComplete(Buffer.from("UPDATE 7"))).toThrow(ProtocolViolationError);
  });
});

describe("relay fast paths", () => {
  /** `frame` inside a bigger chunk, as the relay sees it. */
  const inChunk = (frame: Buffer) => {
    const chunk = Buffer.concat([Buffer.from("xyz"), frame, Buffer.from("tail")]);
    return [chunk, 3, 3 + frame.length] as const;
  };

  it("reads a write's row count from CommandComplete, and nothing from other tags", () => {
    for (const [tag, rows] of [
      ["INSERT 0 5", 5],
      ["UPDATE 2", 2],
      ["DELETE 0", 0],
      ["MERGE 4", 4],
      ["SELECT 3", null],
      ["COPY 10", null],
      ["INSERTED 3", null],
      ["DELETE", null],
      ["", null],
    ] as const) {
      expect(writeCountOf(...inChunk(encode.encodeCommandComplete(tag))), tag).toBe(rows);
    }
  });

  it("refuses a malformed CommandComplete as the decoder does", () => {
    for (const payload of [Buffer.from("SELECT 1"), Buffer.from("SELECT 1\0x\0"), Buffer.alloc(0)]) {
      const frame = encode.encodeFrame(0x43, payload);
      expect(() => decodeCommandComplete(payload)).toThrow(ProtocolViolationError);
      expect(() => writeCountOf(...inChunk(frame))).toThrow(ProtocolViolationError);
    }
  });

  it("reads ReadyForQuery's status, and refuses a malformed one as the decoder does", () => {
    for (const status of ["I", "T", "E"] as const) {
      expect(readyForQueryStatusOf(...inChunk(encode.encodeReadyForQuery(status)))).toBe(status);
    }
    for (const payload of [Buffer.from("X"), Buffer.from("II"), Buffer.alloc(0)]) {
      expect(() => readyForQueryStatusOf(...inChunk(encode.encodeFrame(0x5a, payload)))).toThrow(
        ProtocolViolationError,
      );
    }
  });
});

describe("backend decoders", () => {
  it("skips unknown notice fields and keeps known ones", () => {
    const payload = Buffer.from("SFATAL\0VFATAL\0C28P01\0Mbad password\0Zfuture\0P12x\0\0");
    expect(decodeNoticeFields(payload)).toEqual({
      severity: "FATAL",
      severityNonLocalized: "FATAL",
      code: "28P01",
      message: "bad password",
    });
  });

  it("reports authentication methods pgtoll does not speak", () => {
    expect(decodeAuthentication(int32(7))).toEqual({ type: "unsupported", code: 7 });
  });

  it("copies the secret key so it outlives the chunk", () => {
    const payload = Buffer.concat([int32(5), int32(6)]);
    const { secretKey } = decodeBackendKeyData(payload);
    payload.fill(0);
    expect(secretKey).toEqual(int32(6));
  });

  it("decodes copy responses", () => {
    expect(decodeCopyResponse(Buffer.concat([Buffer.from([0]), int16(2), int16(0), int16(0)]))).toEqual({
      format: 0,
      columnFormats: [0, 0],
    });
  });

  it.each([
    ["ReadyForQuery with unknown status", () => decodeReadyForQuery(Buffer.from("X"))],
    ["ReadyForQuery empty", () => decodeReadyForQuery(Buffer.alloc(0))],
    ["notice without terminator", () => decodeNoticeFields(Buffer.from("SERROR\0"))],
    ["notice value without NUL", () => decodeNoticeFields(Buffer.from("SERROR"))],
    ["md5 without salt", () => decodeAuthentication(Buffer.concat([int32(5), Buffer.from([1])]))],
    ["auth empty", () => decodeAuthentication(Buffer.alloc(2))],
    [
      "SASL list without terminator",
      () => decodeAuthentication(Buffer.concat([int32(10), Buffer.from("SCRAM\0")])),
    ],
    ["key data too short", () => decodeBackendKeyData(int32(1))],
    ["row description count past the end", () => decodeRowDescription(int16(50))],
    [
      "data row column past the end",
      () => decodeDataRow(Buffer.concat([int16(1), int32(9), Buffer.from("ab")])),
    ],
    ["data row negative length", () => decodeDataRow(Buffer.concat([int16(1), int32(-3)]))],
    ["data row trailing bytes", () => dataRowByteLength(Buffer.concat([int16(0), Buffer.from("x")]))],
    ["data row length past the end", () => dataRowByteLength(Buffer.concat([int16(1), int32(100)]))],
    ["data row missing column", () => dataRowByteLength(int16(2))],
    ["data row empty", () => dataRowByteLength(Buffer.alloc(1))],
  ])("rejects %s", (_name, run) => {
    expect(run).toThrow(ProtocolViolationError);
  });
});

describe("backend encoders read by node-postgres's parser", () => {
  function parseWithPg(bytes: Buffer): BackendMessage[] {
    const messages: BackendMessage[] = [];
    new Parser().parse(bytes, (message) => messages.push(message));
    return messages;
  }

  it("agrees on a synthesized result and an error", () => {
    const messages = parseWithPg(
      Buffer.concat([
        encode.encodeRowDescription(["a", { name: "b", typeOid: 23, typeSize: 4 }]),
        encode.encodeDataRow(["x", null]),
        encode.encodeCommandComplete("SELECT 1"),
        encode.encodeErrorResponse({
          severity: "ERROR",
          code: "53400",
          message: "balance exhausted",
          hint: "deposit",
        }),
        encode.encodeReadyForQuery("T"),
      ]),
    );
    expect(messages.map((m) => m.name)).toEqual([
      "rowDescription",
      "dataRow",
      "commandComplete",
      "error",
      "readyForQuery",
    ]);
    expect(messages[0]).toMatchObject({
      fieldCount: 2,
      fields: [
        { name: "a", dataTypeID: 25 },
        { name: "b", dataTypeID: 23 },
      ],
    });
    expect(messages[1]).toMatchObject({ fields: ["x", null] });
    expect(messages[2]).toMatchObject({ text: "SELECT 1" });
    expect(messages[3]).toMatchObject({
      severity: "ERROR",
      code: "53400",
      message: "balance exhausted",
      hint: "deposit",
    });
    expect(messages[4]).toMatchObject({ status: "T" });
  });
});
