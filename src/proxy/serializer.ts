import type { NoticeFields, TransactionStatus } from "./backend-messages.js";
import { NOTICE_FIELD_CODES } from "./backend-messages.js";
import {
  AuthenticationCode,
  BackendCode,
  EncryptionResponse,
  FrontendCode,
  StartupCode,
} from "./message-codes.js";
import { cstringLength, MessageWriter } from "./message-writer.js";

/*
 * Encoders of the messages the proxy sends. Each returns a fresh Buffer holding exactly one
 * message, safe to hand to socket.write. String fields must not contain NUL (RangeError).
 * Raw frames from a FrameReader are relayed as they are: `frame.frame` needs no encoding.
 */

const EMPTY = new Uint8Array(0);

/** Any typed message from a type byte and a body. */
export function encodeFrame(code: number, payload: Uint8Array = EMPTY): Buffer {
  return MessageWriter.typed(code, payload.length).bytes(payload).finish();
}

const emptyMessage = (code: number): Buffer => MessageWriter.typed(code, 0).finish();

// ---- to clients -------------------------------------------------------------------------------

/** The one-byte answer to SSLRequest ('S' go on with TLS, 'N' continue in plain text). */
export function encodeSSLResponse(accept: boolean): Buffer {
  return Buffer.from([accept ? EncryptionResponse.Accept : EncryptionResponse.Refuse]);
}

/** The one-byte answer to GSSENCRequest; pgtoll has no GSSAPI, so normally `false` ('N'). */
export function encodeGSSENCResponse(accept: boolean): Buffer {
  return Buffer.from([accept ? EncryptionResponse.AcceptGSS : EncryptionResponse.Refuse]);
}

function authentication(code: AuthenticationCode, extra: Uint8Array = EMPTY): Buffer {
  return MessageWriter.typed(BackendCode.Authentication, 4 + extra.length)
    .int32(code)
    .bytes(extra)
    .finish();
}

export function encodeAuthenticationOk(): Buffer {
  return authentication(AuthenticationCode.Ok);
}

export function encodeAuthenticationCleartextPassword(): Buffer {
  return authentication(AuthenticationCode.CleartextPassword);
}

/** @param salt exactly 4 random bytes */
export function encodeAuthenticationMD5Password(salt: Uint8Array): Buffer {
  if (salt.length !== 4) throw new RangeError(`md5 salt must be 4 bytes, got ${salt.length}`);
  return authentication(AuthenticationCode.MD5Password, salt);
}

export function encodeAuthenticationSASL(mechanisms: readonly string[]): Buffer {
  const lengths = mechanisms.map((name) => cstringLength(name, "SASL mechanism"));
  const body = 4 + lengths.reduce((sum, length) => sum + length, 0) + 1;
  const writer = MessageWriter.typed(BackendCode.Authentication, body).int32(AuthenticationCode.SASL);
  for (let i = 0; i < mechanisms.length; i++) writer.cstring(mechanisms[i]!, lengths[i]!);
  return writer.byte(0).finish();
}

export function encodeAuthenticationSASLContinue(data: Uint8Array | string): Buffer {
  return authentication(AuthenticationCode.SASLContinue, toBytes(data));
}

export function encodeAuthenticationSASLFinal(data: Uint8Array | string): Buffer {
  return authentication(AuthenticationCode.SASLFinal, toBytes(data));
}

export function encodeParameterStatus(name: string, value: string): Buffer {
  const nameLength = cstringLength(name, "parameter name");
  const valueLength = cstringLength(value, "parameter value");
  return MessageWriter.typed(BackendCode.ParameterStatus, nameLength + valueLength)
    .cstring(name, nameLength)
    .cstring(value, valueLength)
    .finish();
}

/** @param secretKey an int32 (protocol 3.0) or 4..256 raw bytes */
export function encodeBackendKeyData(processId: number, secretKey: number | Uint8Array): Buffer {
  const key = secretKeyBytes(secretKey);
  return MessageWriter.typed(BackendCode.BackendKeyData, 4 + key.length)
    .int32(processId)
    .bytes(key)
    .finish();
}

export function encodeReadyForQuery(status: TransactionStatus): Buffer {
  return MessageWriter.typed(BackendCode.ReadyForQuery, 1).byte(status.charCodeAt(0)).finish();
}

/** What an ErrorResponse or NoticeResponse must say; `severityNonLocalized` defaults to `severity`. */
export type OutgoingNoticeFields = NoticeFields & { severity: string; code: string; message: string };

/** ErrorResponse; writes both 'S' and 'V' so every client version finds a severity. */
export function encodeErrorResponse(fields: OutgoingNoticeFields): Buffer {
  return noticeLike(BackendCode.ErrorResponse, fields);
}

export function encodeNoticeResponse(fields: OutgoingNoticeFields): Buffer {
  return noticeLike(BackendCode.NoticeResponse, fields);
}

function noticeLike(code: BackendCode, fields: OutgoingNoticeFields): Buffer {
  const withSeverity = { ...fields, severityNonLocalized: fields.severityNonLocalized ?? fields.severity };
  const entries: [number, string, number][] = [];
  let body = 1;
  for (const [name, letter] of NOTICE_FIELD_CODES) {
    const value = withSeverity[name];
    if (value === undefined) continue;
    const text = String(value);
    const length = cstringLength(text, `notice field ${name}`);
    entries.push([letter.charCodeAt(0), text, length]);
    body += 1 + length;
  }
  const writer = MessageWriter.typed(code, body);
  for (const [letter, text, length] of entries) writer.byte(letter).cstring(text, length);
  return writer.byte(0).finish();
}

/** @param tag e.g. "SELECT 3", "INSERT 0 5", "SET" */
export function encodeCommandComplete(tag: string): Buffer {
  const length = cstringLength(tag, "command tag");
  return MessageWriter.typed(BackendCode.CommandComplete, length).cstring(tag, length).finish();
}

export function encodePortalSuspended(): Buffer {
  return emptyMessage(BackendCode.PortalSuspended);
}

export function encodeEmptyQueryResponse(): Buffer {
  return emptyMessage(BackendCode.EmptyQueryResponse);
}

/** A column of a synthesized result; defaults describe a text column not tied to a table. */
export interface ColumnDescription {
  name: string;
  /** default 25 (text) */
  typeOid?: number;
  /** default -1 (variable length) */
  typeSize?: number;
  /** default -1 */
  typeModifier?: number;
  /** default 0 (text) */
  format?: number;
  /** default 0 */
  tableOid?: number;
  /** default 0 */
  columnAttr?: number;
}

const TEXT_OID = 25;

export function encodeRowDescription(columns: readonly (string | ColumnDescription)[]): Buffer {
  const described = columns.map((column) => (typeof column === "string" ? { name: column } : column));
  const lengths = described.map((column) => cstringLength(column.name, "column name"));
  const body = 2 + lengths.reduce((sum, length) => sum + length + 18, 0);
  const writer = MessageWriter.typed(BackendCode.RowDescription, body).int16(described.length);
  described.forEach((column, i) => {
    writer
      .cstring(column.name, lengths[i]!)
      .uint32(column.tableOid ?? 0)
      .int16(column.columnAttr ?? 0)
      .uint32(column.typeOid ?? TEXT_OID)
      .int16(column.typeSize ?? -1)
      .int32(column.typeModifier ?? -1)
      .int16(column.format ?? 0);
  });
  return writer.finish();
}

/** One row of a synthesized result; strings are sent as UTF-8 text, null as SQL NULL. */
export function encodeDataRow(values: readonly (string | Uint8Array | null)[]): Buffer {
  const bytes = values.map((value) => (typeof value === "string" ? Buffer.from(value, "utf8") : value));
  const body = 2 + bytes.reduce((sum, value) => sum + 4 + (value?.length ?? 0), 0);
  const writer = MessageWriter.typed(BackendCode.DataRow, body).int16(bytes.length);
  for (const value of bytes) {
    if (value === null) writer.int32(-1);
    else writer.int32(value.length).bytes(value);
  }
  return writer.finish();
}

export function encodeParseComplete(): Buffer {
  return emptyMessage(BackendCode.ParseComplete);
}

export function encodeBindComplete(): Buffer {
  return emptyMessage(BackendCode.BindComplete);
}

export function encodeNoData(): Buffer {
  return emptyMessage(BackendCode.NoData);
}

export function encodeCloseComplete(): Buffer {
  return emptyMessage(BackendCode.CloseComplete);
}

/** Answer to a client asking for a newer 3.x minor or for `_pq_.*` options we do not know. */
export function encodeNegotiateProtocolVersion(
  newestMinor: number,
  unsupportedOptions: readonly string[],
): Buffer {
  const lengths = unsupportedOptions.map((option) => cstringLength(option, "protocol option"));
  const body = 8 + lengths.reduce((sum, length) => sum + length, 0);
  const writer = MessageWriter.typed(BackendCode.NegotiateProtocolVersion, body)
    .int32(newestMinor)
    .int32(unsupportedOptions.length);
  for (let i = 0; i < unsupportedOptions.length; i++) writer.cstring(unsupportedOptions[i]!, lengths[i]!);
  return writer.finish();
}

// ---- to the upstream server --------------------------------------------------------------------

/**
 * StartupMessage for protocol 3.0 (or `protocol` if given).
 * @param params at least `user`; typically also `database`, `application_name`, `client_encoding`
 */
export function encodeStartupMessage(
  params: Readonly<Record<string, string>>,
  protocol: number = StartupCode.ProtocolVersion3,
): Buffer {
  const pairs = Object.entries(params).map(
    ([name, value]) =>
      [
        name,
        cstringLength(name, "startup parameter name"),
        value,
        cstringLength(value, "startup parameter value"),
      ] as const,
  );
  const body =
    4 + pairs.reduce((sum, [, nameLength, , valueLength]) => sum + nameLength + valueLength, 0) + 1;
  const writer = MessageWriter.untyped(body).int32(protocol);
  for (const [name, nameLength, value, valueLength] of pairs)
    writer.cstring(name, nameLength).cstring(value, valueLength);
  return writer.byte(0).finish();
}

/** @param secretKey as received in BackendKeyData: an int32 or 4..256 raw bytes */
export function encodeCancelRequest(processId: number, secretKey: number | Uint8Array): Buffer {
  const key = secretKeyBytes(secretKey);
  return MessageWriter.untyped(8 + key.length)
    .int32(StartupCode.CancelRequest)
    .int32(processId)
    .bytes(key)
    .finish();
}

/** Cleartext password, or the "md5..." string from `md5Password`. */
export function encodePasswordMessage(password: string): Buffer {
  const length = cstringLength(password, "password");
  return MessageWriter.typed(FrontendCode.PasswordMessage, length).cstring(password, length).finish();
}

export function encodeSASLInitialResponse(mechanism: string, data: Uint8Array | string): Buffer {
  const mechanismLength = cstringLength(mechanism, "SASL mechanism");
  const bytes = toBytes(data);
  return MessageWriter.typed(FrontendCode.PasswordMessage, mechanismLength + 4 + bytes.length)
    .cstring(mechanism, mechanismLength)
    .int32(bytes.length)
    .bytes(bytes)
    .finish();
}

export function encodeSASLResponse(data: Uint8Array | string): Buffer {
  return encodeFrame(FrontendCode.PasswordMessage, toBytes(data));
}

export function encodeQuery(sql: string): Buffer {
  const length = cstringLength(sql, "query string");
  return MessageWriter.typed(FrontendCode.Query, length).cstring(sql, length).finish();
}

/** Parse of `sql` as the prepared statement `name` ("" for the unnamed one), with the parameter types' oids. */
export function encodeParse(name: string, sql: string, parameterTypes: readonly number[] = []): Buffer {
  const nameLength = cstringLength(name, "statement name");
  const sqlLength = cstringLength(sql, "query string");
  const writer = MessageWriter.typed(
    FrontendCode.Parse,
    nameLength + sqlLength + 2 + 4 * parameterTypes.length,
  )
    .cstring(name, nameLength)
    .cstring(sql, sqlLength)
    .int16(parameterTypes.length);
  for (const oid of parameterTypes) writer.uint32(oid);
  return writer.finish();
}

/**
 * Bind of the prepared statement `statement` to the portal `portal`, with parameters in text format (a string,
 * UTF-8) or binary (a Buffer), null for SQL NULL, and every result column in text format.
 */
export function encodeBind(
  portal: string,
  statement: string,
  values: readonly (string | Buffer | null)[] = [],
): Buffer {
  const portalLength = cstringLength(portal, "portal name");
  const statementLength = cstringLength(statement, "statement name");
  const encoded = values.map((value) => (typeof value === "string" ? Buffer.from(value, "utf8") : value));
  const valueBytes = encoded.reduce((sum, value) => sum + 4 + (value?.length ?? 0), 0);
  const writer = MessageWriter.typed(
    FrontendCode.Bind,
    portalLength + statementLength + 2 + 2 * values.length + 2 + valueBytes + 2,
  )
    .cstring(portal, portalLength)
    .cstring(statement, statementLength)
    .int16(values.length);
  for (const value of values) writer.int16(typeof value === "string" || value === null ? 0 : 1);
  writer.int16(encoded.length);
  for (const value of encoded) {
    if (value === null) writer.int32(-1);
    else writer.int32(value.length).bytes(value);
  }
  return writer.int16(0).finish();
}

/** Describe of a portal ('P') or a prepared statement ('S'). */
export function encodeDescribe(kind: "P" | "S", name: string): Buffer {
  return targetMessage(FrontendCode.Describe, kind, name);
}

/** Close of a portal ('P') or a prepared statement ('S'). */
export function encodeClose(kind: "P" | "S", name: string): Buffer {
  return targetMessage(FrontendCode.Close, kind, name);
}

function targetMessage(code: FrontendCode, kind: "P" | "S", name: string): Buffer {
  const length = cstringLength(name, "portal or statement name");
  return MessageWriter.typed(code, 1 + length)
    .byte(kind.charCodeAt(0))
    .cstring(name, length)
    .finish();
}

/** @param maxRows the most rows to return, 0 for all */
export function encodeExecute(portal: string, maxRows: number): Buffer {
  const length = cstringLength(portal, "portal name");
  return MessageWriter.typed(FrontendCode.Execute, length + 4)
    .cstring(portal, length)
    .int32(maxRows)
    .finish();
}

/** CopyFail: the client gives up a COPY FROM STDIN, with the reason the server puts in its error. */
export function encodeCopyFail(reason: string): Buffer {
  const length = cstringLength(reason, "CopyFail reason");
  return MessageWriter.typed(FrontendCode.CopyFail, length).cstring(reason, length).finish();
}

export function encodeSync(): Buffer {
  return emptyMessage(FrontendCode.Sync);
}

export function encodeFlush(): Buffer {
  return emptyMessage(FrontendCode.Flush);
}

export function encodeTerminate(): Buffer {
  return emptyMessage(FrontendCode.Terminate);
}

// ---- helpers -----------------------------------------------------------------------------------

function toBytes(data: Uint8Array | string): Uint8Array {
  return typeof data === "string" ? Buffer.from(data, "utf8") : data;
}

function secretKeyBytes(secretKey: number | Uint8Array): Uint8Array {
  if (typeof secretKey === "number") {
    const key = Buffer.allocUnsafe(4);
    key.writeInt32BE(secretKey | 0);
    return key;
  }
  if (secretKey.length < 4 || secretKey.length > 256) {
    throw new RangeError(`secret key must be 4 to 256 bytes, got ${secretKey.length}`);
  }
  return secretKey;
}
