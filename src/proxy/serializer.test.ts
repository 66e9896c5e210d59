import { describe, expect, it } from "vitest";
import {
  dataRowByteLength,
  decodeAuthentication,
  decodeBackendKeyData,
  decodeCommandComplete,
  decodeDataRow,
  decodeNegotiateProtocolVersion,
  decodeNoticeFields,
  decodeParameterStatus,
  decodeReadyForQuery,
  decodeRowDescription,
  rowDescriptionFieldCount,
} from "./backend-messages.js";
import { type Frame, FrameReader } from "./frame-reader.js";
import {
  decodeBind,
  decodeClose,
  decodeDescribe,
  decodeFrontendMessage,
  decodePasswordMessage,
  decodeSASLInitialResponse,
  decodeSASLResponse,
} from "./frontend-messages.js";
import * as encode from "./serializer.js";
import { parseStartupPacket } from "./startup-parser.js";

/** Frames `bytes` with the real reader and checks it holds exactly one message. */
function single(bytes: Buffer): Frame {
  const frames: Frame[] = [];
  const reader = new FrameReader();
  reader.feed(bytes, (frame) => frames.push(frame));
  expect(frames).toHaveLength(1);
  expect(reader.bufferedBytes).toBe(0);
  return frames[0]!;
}

const letter = (frame: Frame) => String.fromCharCode(frame.code);

describe("serializer round trips: to clients", () => {
  it("authentication requests", () => {
    expect(decodeAuthentication(single(encode.encodeAuthenticationOk()).payload)).toEqual({ type: "ok" });
    expect(decodeAuthentication(single(encode.encodeAuthenticationCleartextPassword()).payload)).toEqual({
      type: "cleartextPassword",
    });
    const salt = Buffer.from([1, 2, 3, 4]);
    expect(decodeAuthentication(single(encode.encodeAuthenticationMD5Password(salt)).payload)).toEqual({
      type: "md5Password",
      salt,
    });
    expect(
      decodeAuthentication(
        single(encode.encodeAuthenticationSASL(["SCRAM-SHA-256", "SCRAM-SHA-256-PLUS"])).payload,
      ),
    ).toEqual({ type: "sasl", mechanisms: ["SCRAM-SHA-256", "SCRAM-SHA-256-PLUS"] });
    expect(
      decodeAuthentication(single(encode.encodeAuthenticationSASLContinue("r=abc,s=x,i=1")).payload),
    ).toEqual({
      type: "saslContinue",
      data: Buffer.from("r=abc,s=x,i=1"),
    });
    expect(decodeAuthentication(single(encode.encodeAuthenticationSASLFinal("v=sig")).payload)).toEqual({
      type: "saslFinal",
      data: Buffer.from("v=sig"),
    });
    expect(() => encode.encodeAuthenticationMD5Password(Buffer.alloc(3))).toThrow(RangeError);
  });

  it("session parameters, key data and ReadyForQuery", () => {
    const status = single(encode.encodeParameterStatus("server_version", "17.2 (pgtoll)"));
    expect(letter(status)).toBe("S");
    expect(decodeParameterStatus(status.payload)).toEqual({ name: "server_version", value: "17.2 (pgtoll)" });
    expect(decodeBackendKeyData(single(encode.encodeBackendKeyData(77, 0x01020304)).payload)).toEqual({
      processId: 77,
      secretKey: Buffer.from([1, 2, 3, 4]),
    });
    for (const s of ["I", "T", "E"] as const) {
      expect(decodeReadyForQuery(single(encode.encodeReadyForQuery(s)).payload)).toBe(s);
    }
  });

  it("ErrorResponse writes S and V and every given field; NoticeResponse likewise", () => {
    const frame = single(
      encode.encodeErrorResponse({
        severity: "ERROR",
        code: "42501",
        message: "permission denied: DROP is not allowed",
        detail: "policy",
        hint: "ask the provider",
        position: 12,
      }),
    );
    expect(letter(frame)).toBe("E");
    expect(decodeNoticeFields(frame.payload)).toEqual({
      severity: "ERROR",
      severityNonLocalized: "ERROR",
      code: "42501",
      message: "permission denied: DROP is not allowed",
      detail: "policy",
      hint: "ask the provider",
      position: 12,
    });
    expect(frame.payload.includes(Buffer.from("VERROR\0"))).toBe(true);
    const notice = single(encode.encodeNoticeResponse({ severity: "NOTICE", code: "00000", message: "hi" }));
    expect(letter(notice)).toBe("N");
    expect(decodeNoticeFields(notice.payload)).toMatchObject({ severity: "NOTICE", message: "hi" });
  });

  it("refuses NUL inside a C string instead of corrupting the message", () => {
    expect(() => encode.encodeErrorResponse({ severity: "ERROR", code: "XX000", message: "a\0Mb" })).toThrow(
      RangeError,
    );
    expect(() => encode.encodeQuery("select 1\0; drop table t")).toThrow(RangeError);
  });

  it("CommandComplete and the empty responses", () => {
    expect(decodeCommandComplete(single(encode.encodeCommandComplete("INSERT 0 5")).payload)).toEqual({
      tag: "INSERT 0 5",
      command: "INSERT",
      rows: 5,
    });
    const empties: [() => Buffer, string][] = [
      [encode.encodeEmptyQueryResponse, "I"],
      [encode.encodeParseComplete, "1"],
      [encode.encodeBindComplete, "2"],
      [encode.encodeCloseComplete, "3"],
      [encode.encodeNoData, "n"],
    ];
    for (const [fn, code] of empties) {
      const frame = single(fn());
      expect([letter(frame), frame.payload.length]).toEqual([code, 0]);
    }
  });

  it("RowDescription and DataRow of a synthesized result", () => {
    const description = single(
      encode.encodeRowDescription(["balance", { name: "rows", typeOid: 20, typeSize: 8 }]),
    );
    expect(rowDescriptionFieldCount(description.payload)).toBe(2);
    expect(decodeRowDescription(description.payload)).toEqual([
      { name: "balance", tableOid: 0, columnAttr: 0, typeOid: 25, typeSize: -1, typeModifier: -1, format: 0 },
      { name: "rows", tableOid: 0, columnAttr: 0, typeOid: 20, typeSize: 8, typeModifier: -1, format: 0 },
    ]);
    const row = single(encode.encodeDataRow(["1.500000", null, "", "é"]));
    expect(decodeDataRow(row.payload)).toEqual([
      Buffer.from("1.500000"),
      null,
      Buffer.alloc(0),
      Buffer.from("é"),
    ]);
    expect(dataRowByteLength(row.payload)).toBe(8 + 0 + 0 + 2);
  });

  it("NegotiateProtocolVersion", () => {
    const frame = single(encode.encodeNegotiateProtocolVersion(0, ["_pq_.a", "_pq_.b"]));
    expect(decodeNegotiateProtocolVersion(frame.payload)).toEqual({
      newestMinor: 0,
      unsupportedOptions: ["_pq_.a", "_pq_.b"],
    });
  });

  it("single-byte encryption answers", () => {
    expect(encode.encodeSSLResponse(true).toString()).toBe("S");
    expect(encode.encodeSSLResponse(false).toString()).toBe("N");
    expect(encode.encodeGSSENCResponse(false).toString()).toBe("N");
  });
});

describe("serializer round trips: to the upstream server", () => {
  it("StartupMessage and CancelRequest", () => {
    expect(parseStartupPacket(encode.encodeStartupMessage({ user: "u", database: "db" }))).toMatchObject({
      kind: "startup",
      protocol: { major: 3, minor: 0 },
      params: { user: "u", database: "db" },
    });
    expect(parseStartupPacket(encode.encodeCancelRequest(9, 10))).toMatchObject({
      kind: "cancelRequest",
      processId: 9,
      secretKey: Buffer.from([0, 0, 0, 10]),
    });
  });

  it("password and SASL responses", () => {
    expect(decodePasswordMessage(single(encode.encodePasswordMessage("s3cret")).payload)).toBe("s3cret");
    expect(
      decodeSASLInitialResponse(
        single(encode.encodeSASLInitialResponse("SCRAM-SHA-256", "n,,n=,r=x")).payload,
      ),
    ).toEqual({ mechanism: "SCRAM-SHA-256", data: Buffer.from("n,,n=,r=x") });
    expect(decodeSASLResponse(single(encode.encodeSASLResponse("c=biws")).payload).toString()).toBe("c=biws");
  });

  it("Query, Sync, Terminate and a generic frame", () => {
    const query = single(encode.encodeQuery("SELECT 'ü'"));
    expect(decodeFrontendMessage(query.code, query.payload)).toEqual({ type: "query", sql: "SELECT 'ü'" });
    const sync = single(encode.encodeSync());
    expect(decodeFrontendMessage(sync.code, sync.payload)).toEqual({ type: "sync" });
    const terminate = single(encode.encodeTerminate());
    expect(decodeFrontendMessage(terminate.code, terminate.payload)).toEqual({ type: "terminate" });
    const bind = single(encode.encodeBind("", "s1", ["42", null, Buffer.from([1, 2]), "é"]));
    expect(decodeBind(bind.payload)).toEqual({
      portal: "",
      statement: "s1",
      paramFormats: [0, 0, 1, 0],
      params: [Buffer.from("42"), null, Buffer.from([1, 2]), Buffer.from("é")],
      resultFormats: [],
    });
    expect(decodeDescribe(single(encode.encodeDescribe("P", "")).payload)).toEqual({ kind: "P", name: "" });
    expect(decodeClose(single(encode.encodeClose("S", "s7")).payload)).toEqual({ kind: "S", name: "s7" });
    const copyFail = single(encode.encodeCopyFail("no COPY here"));
    expect(decodeFrontendMessage(copyFail.code, copyFail.payload)).toEqual({
      type: "copyFail",
      message: "no COPY here",
    });
    const copy = single(encode.encodeFrame(0x64, Buffer.from("1\tx\n")));
    expect(decodeFrontendMessage(copy.code, copy.payload)).toEqual({
      type: "copyData",
      data: Buffer.from("1\tx\n"),
    });
  });
});
