import { FRAME_HEADER_LENGTH } from "./frame-reader.js";
import { AuthenticationCode } from "./message-codes.js";
import { PayloadReader } from "./payload-reader.js";
import { ProtocolViolationError } from "./protocol-violation-error.js";

/*
 * Decoders of the server messages the proxy inspects. Each takes one frame's payload and throws
 * only ProtocolViolationError. Server text is decoded leniently (invalid UTF-8 is replaced), since
 * it is shown, not executed.
 */

const lenient = (payload: Buffer, what: string): PayloadReader => new PayloadReader(payload, what, false);

export interface CommandTag {
  /** The tag without its counts: "INSERT", "SELECT", "CREATE TABLE"... */
  command: string;
  /** Rows affected or returned, for the tags that carry a count; null otherwise. */
  rows: number | null;
}

export interface CommandCompleteMessage extends CommandTag {
  tag: string;
}

const COUNTED_COMMANDS = new Set(["SELECT", "UPDATE", "DELETE", "MERGE", "COPY", "FETCH", "MOVE"]);
const DIGITS = /^\d+$/;

/**
 * Splits a CommandComplete tag: "INSERT 0 5" → INSERT 5 (the 0 is the legacy OID), "SELECT 3" →
 * SELECT 3, "CREATE TABLE" → rows null. A count bigger than 2^53 loses precision.
 */
export function parseCommandTag(tag: string): CommandTag {
  const space = tag.lastIndexOf(" ");
  if (space > 0) {
    const count = tag.slice(space + 1);
    if (DIGITS.test(count)) {
      const head = tag.slice(0, space);
      if (COUNTED_COMMANDS.has(head)) return { command: head, rows: Number(count) };
      const oidSpace = head.lastIndexOf(" ");
      if (head.slice(0, oidSpace) === "INSERT" && DIGITS.test(head.slice(oidSpace + 1))) {
        return { command: "INSERT", rows: Number(count) };
      }
    }
  }
  return { command: tag, rows: null };
}

export function decodeCommandComplete(payload: Buffer): CommandCompleteMessage {
  const reader = lenient(payload, "CommandComplete");
  const tag = reader.cstring("command tag");
  reader.end();
  return { tag, ...parseCommandTag(tag) };
}

const WRITE_COMMANDS = new Set(["INSERT", "UPDATE", "DELETE", "MERGE"]);

/**
 * The row count of a CommandComplete that reports a write (INSERT, UPDATE, DELETE, MERGE), or null for any
 * other tag, read from the whole frame `buffer[start, end)`. The relay's per-statement path: the tag is
 * decoded only when it can be a write, but always checked as {@link decodeCommandComplete} checks it.
 */
export function writeCountOf(buffer: Buffer, start: number, end: number): number | null {
  const tagStart = start + 5;
  if (buffer.indexOf(0, tagStart) !== end - 1 || end - 1 < tagStart) {
    decodeCommandComplete(buffer.subarray(tagStart, end)); // throws the precise protocol violation
  }
  const first = buffer[tagStart];
  // I(NSERT), U(PDATE), D(ELETE), M(ERGE)
  if (first !== 0x49 && first !== 0x55 && first !== 0x44 && first !== 0x4d) return null;
  const { command, rows } = parseCommandTag(buffer.toString("latin1", tagStart, end - 1));
  return rows !== null && WRITE_COMMANDS.has(command) ? rows : null;
}

/** Fields of ErrorResponse / NoticeResponse by their documented names. */
export interface NoticeFields {
  /** 'S': localized severity (ERROR, FATAL, PANIC, WARNING, NOTICE, DEBUG, INFO, LOG). */
  severity?: string;
  /** 'V': severity never localized. */
  severityNonLocalized?: string;
  /** 'C': SQLSTATE. */
  code?: string;
  /** 'M' */
  message?: string;
  /** 'D' */
  detail?: string;
  /** 'H' */
  hint?: string;
  /** 'P': 1-based character index into the query string. */
  position?: number;
  /** 'p' */
  internalPosition?: number;
  /** 'q' */
  internalQuery?: string;
  /** 'W' */
  where?: string;
  /** 's' */
  schema?: string;
  /** 't' */
  table?: string;
  /** 'c' */
  column?: string;
  /** 'd' */
  dataType?: string;
  /** 'n' */
  constraint?: string;
  /** 'F' */
  file?: string;
  /** 'L' */
  line?: string;
  /** 'R' */
  routine?: string;
}

/** Wire letter of each field, in the order PostgreSQL sends them. */
export const NOTICE_FIELD_CODES: ReadonlyArray<readonly [keyof NoticeFields, string]> = [
  ["severity", "S"],
  ["severityNonLocalized", "V"],
  ["code", "C"],
  ["message", "M"],
  ["detail", "D"],
  ["hint", "H"],
  ["position", "P"],
  ["internalPosition", "p"],
  ["internalQuery", "q"],
  ["where", "W"],
  ["schema", "s"],
  ["table", "t"],
  ["column", "c"],
  ["dataType", "d"],
  ["constraint", "n"],
  ["file", "F"],
  ["line", "L"],
  ["routine", "R"],
];

const FIELD_BY_CODE = new Map<number, keyof NoticeFields>(
  NOTICE_FIELD_CODES.map(([name, letter]) => [letter.charCodeAt(0), name]),
);

/** Decodes ErrorResponse or NoticeResponse. Unknown field letters are skipped, as the protocol asks. */
export function decodeNoticeFields(payload: Buffer): NoticeFields {
  const reader = lenient(payload, "ErrorResponse/NoticeResponse");
  const fields: NoticeFields = {};
  for (let letter = reader.byte("field type"); letter !== 0; letter = reader.byte("field type")) {
    const value = reader.cstring("field value");
    const name = FIELD_BY_CODE.get(letter);
    if (name === "position" || name === "internalPosition") {
      if (/^\d+$/.test(value)) fields[name] = Number(value);
    } else if (name !== undefined) {
      fields[name] = value;
    }
  }
  reader.end();
  return fields;
}

export type TransactionStatus = "I" | "T" | "E";

export function decodeReadyForQuery(payload: Buffer): TransactionStatus {
  const reader = lenient(payload, "ReadyForQuery");
  const status = String.fromCharCode(reader.byte("transaction status"));
  reader.end();
  if (status === "I" || status === "T" || status === "E") return status;
  return reader.fail(`unknown transaction status ${JSON.stringify(status)}`);
}

/** {@link decodeReadyForQuery} of the whole frame `buffer[start, end)`, without allocating. */
export function readyForQueryStatusOf(buffer: Buffer, start: number, end: number): TransactionStatus {
  const status = buffer[start + 5];
  if (end - start === 6 && (status === 0x49 || status === 0x54 || status === 0x45)) {
    return status === 0x49 ? "I" : status === 0x54 ? "T" : "E";
  }
  return decodeReadyForQuery(buffer.subarray(start + 5, end));
}

export interface BackendKeyDataMessage {
  processId: number;
  /** 4 bytes in protocol 3.0, up to 256 from 3.2; a copy, safe to keep. */
  secretKey: Buffer;
}

export function decodeBackendKeyData(payload: Buffer): BackendKeyDataMessage {
  const reader = lenient(payload, "BackendKeyData");
  const processId = reader.int32("process id");
  const key = reader.rest();
  if (key.length < 4 || key.length > 256) reader.fail(`secret key of ${key.length} bytes`);
  return { processId, secretKey: Buffer.from(key) };
}

export interface ParameterStatusMessage {
  name: string;
  value: string;
}

export function decodeParameterStatus(payload: Buffer): ParameterStatusMessage {
  const reader = lenient(payload, "ParameterStatus");
  const name = reader.cstring("name");
  const value = reader.cstring("value");
  reader.end();
  return { name, value };
}

export type AuthenticationMessage =
  | { type: "ok" }
  | { type: "cleartextPassword" }
  | { type: "md5Password"; salt: Buffer }
  | { type: "sasl"; mechanisms: string[] }
  | { type: "saslContinue"; data: Buffer }
  | { type: "saslFinal"; data: Buffer }
  /** Kerberos, GSS, SSPI: methods pgtoll does not speak. */
  | { type: "unsupported"; code: number };

export function decodeAuthentication(payload: Buffer): AuthenticationMessage {
  const reader = lenient(payload, "Authentication");
  const code = reader.int32("authentication type");
  switch (code) {
    case AuthenticationCode.Ok:
      reader.end();
      return { type: "ok" };
    case AuthenticationCode.CleartextPassword:
      reader.end();
      return { type: "cleartextPassword" };
    case AuthenticationCode.MD5Password: {
      const salt = reader.bytes(4, "salt");
      reader.end();
      return { type: "md5Password", salt };
    }
    case AuthenticationCode.SASL: {
      const mechanisms: string[] = [];
      for (let name = reader.cstring("mechanism"); name !== ""; name = reader.cstring("mechanism")) {
        mechanisms.push(name);
      }
      reader.end();
      return { type: "sasl", mechanisms };
    }
    case AuthenticationCode.SASLContinue:
      return { type: "saslContinue", data: reader.rest() };
    case AuthenticationCode.SASLFinal:
      return { type: "saslFinal", data: reader.rest() };
    default:
      return { type: "unsupported", code };
  }
}

export interface RowDescriptionField {
  name: string;
  tableOid: number;
  columnAttr: number;
  typeOid: number;
  typeSize: number;
  typeModifier: number;
  /** 0 text, 1 binary */
  format: number;
}

/** Column count of a RowDescription without decoding the columns. */
export function rowDescriptionFieldCount(payload: Buffer): number {
  return lenient(payload, "RowDescription").uint16("field count");
}

export function decodeRowDescription(payload: Buffer): RowDescriptionField[] {
  const reader = lenient(payload, "RowDescription");
  const count = reader.uint16("field count");
  // A field is at least 19 bytes: refuse absurd counts before allocating.
  if (count * 19 > reader.remaining) reader.fail(`${count} fields run past the end of the message`);
  const fields = new Array<RowDescriptionField>(count);
  for (let i = 0; i < count; i++) {
    fields[i] = {
      name: reader.cstring("field name"),
      tableOid: reader.uint32("table OID"),
      columnAttr: reader.int16("column number"),
      typeOid: reader.uint32("type OID"),
      typeSize: reader.int16("type size"),
      typeModifier: reader.int32("type modifier"),
      format: reader.int16("format code"),
    };
  }
  reader.end();
  return fields;
}

/**
 * Sum of the value bytes of a DataRow (NULLs count 0), walking only the length words; also checks
 * that the row is well formed. For metering by size without decoding values.
 */
export function dataRowByteLength(payload: Buffer): number {
  if (payload.length < 2) malformedDataRow("column count runs past the end of the message");
  const columns = payload.readUInt16BE(0);
  let offset = 2;
  let total = 0;
  for (let i = 0; i < columns; i++) {
    if (payload.length - offset < 4) malformedDataRow(`column ${i + 1} is truncated`);
    const length = payload.readInt32BE(offset);
    offset += 4;
    if (length === -1) continue;
    if (length < 0 || length > payload.length - offset) {
      malformedDataRow(`column ${i + 1} has invalid length ${length}`);
    }
    offset += length;
    total += length;
  }
  if (offset !== payload.length) malformedDataRow("unexpected trailing bytes");
  return total;
}

function malformedDataRow(detail: string): never {
  throw new ProtocolViolationError(`invalid DataRow message: ${detail}`);
}

/** Values of a DataRow as views of the payload; null is SQL NULL. */
export function decodeDataRow(payload: Buffer): (Buffer | null)[] {
  const reader = lenient(payload, "DataRow");
  const count = reader.uint16("column count");
  if (count * 4 > reader.remaining) reader.fail(`${count} columns run past the end of the message`);
  const values = new Array<Buffer | null>(count);
  for (let i = 0; i < count; i++) {
    const length = reader.int32("column length");
    if (length === -1) values[i] = null;
    else values[i] = reader.bytes(length, "column value");
  }
  reader.end();
  return values;
}

export interface CopyResponseMessage {
  /** Overall format: 0 text, 1 binary. */
  format: number;
  columnFormats: number[];
}

/** CopyInResponse, CopyOutResponse and CopyBothResponse share one layout. */
export function decodeCopyResponse(payload: Buffer): CopyResponseMessage {
  const reader = lenient(payload, "CopyResponse");
  const format = reader.byte("format");
  const count = reader.uint16("column count");
  if (count * 2 > reader.remaining) reader.fail(`${count} columns run past the end of the message`);
  const columnFormats = new Array<number>(count);
  for (let i = 0; i < count; i++) columnFormats[i] = reader.int16("column format");
  reader.end();
  return { format, columnFormats };
}

export interface NegotiateProtocolVersionMessage {
  /** Newest minor version of the requested major the server supports. */
  newestMinor: number;
  /** `_pq_.*` options the server did not recognise. */
  unsupportedOptions: string[];
}

export function decodeNegotiateProtocolVersion(payload: Buffer): NegotiateProtocolVersionMessage {
  const reader = lenient(payload, "NegotiateProtocolVersion");
  const newestMinor = reader.int32("minor version");
  const count = reader.int32("option count");
  if (count < 0 || count > reader.remaining) reader.fail(`invalid option count ${count}`);
  const unsupportedOptions = new Array<string>(count);
  for (let i = 0; i < count; i++) unsupportedOptions[i] = reader.cstring("option name");
  reader.end();
  return { newestMinor, unsupportedOptions };
}

/** Whether a whole ErrorResponse frame ends the session (FATAL or PANIC), by its never-localized severity. */
export function isFatalError(frame: Buffer): boolean {
  const fields = decodeNoticeFields(frame.subarray(FRAME_HEADER_LENGTH));
  const severity = fields.severityNonLocalized ?? fields.severity;
  return severity === "FATAL" || severity === "PANIC";
}
