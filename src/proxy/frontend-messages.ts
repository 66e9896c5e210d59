import { FrontendCode } from "./message-codes.js";
import { PayloadReader } from "./payload-reader.js";
import { ProtocolViolationError } from "./protocol-violation-error.js";

export { ProtocolViolationError };

/*
 * Decoders of client messages. Each takes the payload of one frame (see FrameReader), validates it
 * completely and throws only ProtocolViolationError. Strings must be valid UTF-8: the guard has to
 * see exactly the text the server will run. Buffers in results are views of the payload.
 */

export interface QueryMessage {
  sql: string;
}

export interface ParseMessage {
  /** Prepared statement name, "" for the unnamed statement. */
  name: string;
  sql: string;
  /** Parameter type OIDs (0 = let the server infer). */
  paramTypes: number[];
}

export interface BindMessage {
  /** Portal name, "" for the unnamed portal. */
  portal: string;
  statement: string;
  /** Empty (all text), one (applies to all) or one per parameter; 0 = text, 1 = binary. */
  paramFormats: number[];
  /** Parameter values as views of the payload; null is SQL NULL. */
  params: (Buffer | null)[];
  resultFormats: number[];
}

/** Target of Describe and Close: 'S' a prepared statement, 'P' a portal. */
export interface TargetMessage {
  kind: "S" | "P";
  name: string;
}

export interface ExecuteMessage {
  portal: string;
  /** Row limit; 0 means no limit (the wire's non-positive values are all mapped to 0). */
  maxRows: number;
}

export interface SASLInitialResponseMessage {
  mechanism: string;
  /** Client-first message, or null when the client sent none (length -1). */
  data: Buffer | null;
}

export interface CopyFailMessage {
  message: string;
}

export interface FunctionCallMessage {
  functionOid: number;
}

/** A decoded client message. 'p' is left raw: only the auth exchange knows which kind it is. */
export type FrontendMessage =
  | ({ type: "query" } & QueryMessage)
  | ({ type: "parse" } & ParseMessage)
  | ({ type: "bind" } & BindMessage)
  | ({ type: "describe" } & TargetMessage)
  | ({ type: "close" } & TargetMessage)
  | ({ type: "execute" } & ExecuteMessage)
  | { type: "sync" }
  | { type: "flush" }
  | { type: "terminate" }
  | { type: "copyData"; data: Buffer }
  | { type: "copyDone" }
  | ({ type: "copyFail" } & CopyFailMessage)
  | ({ type: "functionCall" } & FunctionCallMessage)
  | { type: "authResponse"; data: Buffer };

export function decodeQuery(payload: Buffer): QueryMessage {
  const reader = new PayloadReader(payload, "Query");
  const sql = reader.cstring("query string");
  reader.end();
  return { sql };
}

export function decodeParse(payload: Buffer): ParseMessage {
  const reader = new PayloadReader(payload, "Parse");
  const name = reader.cstring("statement name");
  const sql = reader.cstring("query string");
  const count = reader.uint16("parameter type count");
  if (count * 4 > reader.remaining) reader.fail(`${count} parameter types run past the end of the message`);
  const paramTypes = new Array<number>(count);
  for (let i = 0; i < count; i++) paramTypes[i] = reader.uint32("parameter type");
  reader.end();
  return { name, sql, paramTypes };
}

export function decodeBind(payload: Buffer): BindMessage {
  const reader = new PayloadReader(payload, "Bind");
  const portal = reader.cstring("portal name");
  const statement = reader.cstring("statement name");
  const paramFormats = readFormats(reader, "parameter format");
  const count = reader.uint16("parameter count");
  // Each parameter needs at least its length word: refuse absurd counts before allocating.
  if (count * 4 > reader.remaining) reader.fail(`${count} parameters run past the end of the message`);
  if (paramFormats.length > 1 && paramFormats.length !== count) {
    reader.fail(`${paramFormats.length} parameter formats but ${count} parameters`);
  }
  const params = new Array<Buffer | null>(count);
  for (let i = 0; i < count; i++) {
    const length = reader.int32("parameter length");
    if (length === -1) params[i] = null;
    else if (length < 0) reader.fail(`parameter ${i + 1} has negative length ${length}`);
    else params[i] = reader.bytes(length, "parameter value");
  }
  const resultFormats = readFormats(reader, "result format");
  reader.end();
  return { portal, statement, paramFormats, params, resultFormats };
}

/**
 * The portal and statement names of a Bind, checked exactly as {@link decodeBind} checks the whole message
 * but without collecting its formats and values: the relay's per-Execute path needs only the names.
 */
export function decodeBindTarget(payload: Buffer): { portal: string; statement: string } {
  const reader = new PayloadReader(payload, "Bind");
  const portal = reader.cstring("portal name");
  const statement = reader.cstring("statement name");
  const formats = skipFormats(reader, "parameter format");
  const count = reader.uint16("parameter count");
  if (count * 4 > reader.remaining) reader.fail(`${count} parameters run past the end of the message`);
  if (formats > 1 && formats !== count) reader.fail(`${formats} parameter formats but ${count} parameters`);
  for (let i = 0; i < count; i++) {
    const length = reader.int32("parameter length");
    if (length < -1) reader.fail(`parameter ${i + 1} has negative length ${length}`);
    if (length > 0) reader.bytes(length, "parameter value");
  }
  skipFormats(reader, "result format");
  reader.end();
  return { portal, statement };
}

/** Reads past a format code list as {@link readFormats} does; returns its length. */
function skipFormats(reader: PayloadReader, field: string): number {
  const count = reader.uint16(`${field} count`);
  if (count * 2 > reader.remaining) reader.fail(`${count} ${field}s run past the end of the message`);
  for (let i = 0; i < count; i++) reader.int16(field);
  return count;
}

/** Format codes are not checked here: the server rejects unknown ones with a proper SQLSTATE. */
function readFormats(reader: PayloadReader, field: string): number[] {
  const count = reader.uint16(`${field} count`);
  if (count * 2 > reader.remaining) reader.fail(`${count} ${field}s run past the end of the message`);
  const formats = new Array<number>(count);
  for (let i = 0; i < count; i++) formats[i] = reader.int16(field);
  return formats;
}

function decodeTarget(payload: Buffer, what: string): TargetMessage {
  const reader = new PayloadReader(payload, what);
  const kind = reader.byte("target kind");
  if (kind !== 0x53 && kind !== 0x50) reader.fail(`invalid target kind ${kind}, expected 'S' or 'P'`);
  const name = reader.cstring("name");
  reader.end();
  return { kind: kind === 0x53 ? "S" : "P", name };
}

export function decodeDescribe(payload: Buffer): TargetMessage {
  return decodeTarget(payload, "Describe");
}

export function decodeClose(payload: Buffer): TargetMessage {
  return decodeTarget(payload, "Close");
}

export function decodeExecute(payload: Buffer): ExecuteMessage {
  const reader = new PayloadReader(payload, "Execute");
  const portal = reader.cstring("portal name");
  const maxRows = reader.int32("row limit");
  reader.end();
  return { portal, maxRows: Math.max(maxRows, 0) };
}

/** PasswordMessage (cleartext or "md5..." hash). */
export function decodePasswordMessage(payload: Buffer): string {
  const reader = new PayloadReader(payload, "PasswordMessage");
  const password = reader.cstring("password");
  reader.end();
  return password;
}

export function decodeSASLInitialResponse(payload: Buffer): SASLInitialResponseMessage {
  const reader = new PayloadReader(payload, "SASLInitialResponse");
  const mechanism = reader.cstring("mechanism");
  const length = reader.int32("data length");
  const data = length === -1 ? null : reader.bytes(length, "data");
  reader.end();
  return { mechanism, data };
}

/** SASLResponse and GSSResponse carry their data raw. */
export function decodeSASLResponse(payload: Buffer): Buffer {
  return payload;
}

export function decodeCopyFail(payload: Buffer): CopyFailMessage {
  const reader = new PayloadReader(payload, "CopyFail");
  const message = reader.cstring("error message");
  reader.end();
  return { message };
}

/** Identifies the function; the arguments are checked for shape but not returned. */
export function decodeFunctionCall(payload: Buffer): FunctionCallMessage {
  const reader = new PayloadReader(payload, "FunctionCall");
  const functionOid = reader.uint32("function OID");
  const formats = readFormats(reader, "argument format");
  const count = reader.uint16("argument count");
  if (formats.length > 1 && formats.length !== count) {
    reader.fail(`${formats.length} argument formats but ${count} arguments`);
  }
  for (let i = 0; i < count; i++) {
    const length = reader.int32("argument length");
    if (length !== -1) reader.bytes(length, "argument value");
  }
  reader.int16("result format");
  reader.end();
  return { functionOid };
}

/** Sync, Flush, Terminate and CopyDone have no body. */
export function assertEmptyPayload(payload: Buffer, what: string): void {
  if (payload.length !== 0) {
    throw new ProtocolViolationError(`invalid ${what} message: ${payload.length} unexpected byte(s)`);
  }
}

/**
 * Decodes any client message after startup by its type byte.
 * @throws ProtocolViolationError for an unknown type byte or a malformed body
 */
export function decodeFrontendMessage(code: number, payload: Buffer): FrontendMessage {
  switch (code) {
    case FrontendCode.Query:
      return { type: "query", ...decodeQuery(payload) };
    case FrontendCode.Parse:
      return { type: "parse", ...decodeParse(payload) };
    case FrontendCode.Bind:
      return { type: "bind", ...decodeBind(payload) };
    case FrontendCode.Describe:
      return { type: "describe", ...decodeDescribe(payload) };
    case FrontendCode.Close:
      return { type: "close", ...decodeClose(payload) };
    case FrontendCode.Execute:
      return { type: "execute", ...decodeExecute(payload) };
    case FrontendCode.Sync:
      assertEmptyPayload(payload, "Sync");
      return { type: "sync" };
    case FrontendCode.Flush:
      assertEmptyPayload(payload, "Flush");
      return { type: "flush" };
    case FrontendCode.Terminate:
      assertEmptyPayload(payload, "Terminate");
      return { type: "terminate" };
    case FrontendCode.CopyData:
      return { type: "copyData", data: payload };
    case FrontendCode.CopyDone:
      assertEmptyPayload(payload, "CopyDone");
      return { type: "copyDone" };
    case FrontendCode.CopyFail:
      return { type: "copyFail", ...decodeCopyFail(payload) };
    case FrontendCode.FunctionCall:
      return { type: "functionCall", ...decodeFunctionCall(payload) };
    case FrontendCode.PasswordMessage:
      return { type: "authResponse", data: payload };
    default:
      throw new ProtocolViolationError(`invalid frontend message type ${code}`);
  }
}
