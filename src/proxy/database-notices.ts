import { boundText, DATABASE_NAME_LIMIT } from "../billing/message-bounds.js";
import { withheldDatabaseText } from "../billing/priced-text.js";
import { decodeNoticeFields, type NoticeFields } from "./backend-messages.js";
import { FRAME_HEADER_LENGTH } from "./frame-reader.js";
import { BackendCode } from "./message-codes.js";
import { encodeErrorResponse, encodeNoticeResponse, type OutgoingNoticeFields } from "./serializer.js";

/**
 * What an agent receives of an ErrorResponse or NoticeResponse from the provider's database: severity, SQLSTATE,
 * position, source location and object names as they are; message, detail and hint cut to 256 bytes each;
 * context (`WHERE`) and the internal query dropped, since they can quote whole statements and values. Every
 * other field is dropped. One function for errors and notices, on every surface of the proxy.
 */
export function boundedNotice(buffer: Buffer, start: number, end: number): Buffer {
  const fields = decodeNoticeFields(buffer.subarray(start + FRAME_HEADER_LENGTH, end));
  const bounded: OutgoingNoticeFields = {
    severity: fields.severity ?? "ERROR",
    code: fields.code ?? "XX000",
    message: boundText(fields.message ?? ""),
  };
  if (fields.severityNonLocalized) bounded.severityNonLocalized = fields.severityNonLocalized;
  if (fields.detail !== undefined) bounded.detail = boundText(fields.detail);
  if (fields.hint !== undefined) bounded.hint = boundText(fields.hint);
  if (fields.position !== undefined) bounded.position = fields.position;
  for (const name of NAME_FIELDS) {
    const value = fields[name];
    if (typeof value === "string") bounded[name] = boundText(value, DATABASE_NAME_LIMIT);
  }
  if (fields.file !== undefined) bounded.file = boundText(fields.file, DATABASE_NAME_LIMIT);
  if (fields.line !== undefined) bounded.line = boundText(fields.line, 16);
  if (fields.routine !== undefined) bounded.routine = boundText(fields.routine, DATABASE_NAME_LIMIT);
  return buffer[start] === BackendCode.ErrorResponse
    ? encodeErrorResponse(bounded)
    : encodeNoticeResponse(bounded);
}

const NAME_FIELDS = [
  "schema",
  "table",
  "column",
  "dataType",
  "constraint",
] as const satisfies readonly (keyof NoticeFields)[];

/**
 * An error from the database whose text the agent could not pay for (its balance ran out within the statement):
 * the SQLSTATE and severity are kept, so that the client handles it as it would the original, and the text is not.
 */
export function withheldError(buffer: Buffer, start: number, end: number): Buffer {
  const fields = decodeNoticeFields(buffer.subarray(start + FRAME_HEADER_LENGTH, end));
  return encodeErrorResponse({
    severity: fields.severity ?? "ERROR",
    code: fields.code ?? "XX000",
    message: `the database refused the statement (SQLSTATE ${fields.code ?? "XX000"}); its message is withheld: the balance does not pay for it`,
    hint: "deposit funds with this provider to receive error messages",
  });
}

/**
 * An ErrorResponse or NoticeResponse of a statement that reads a priced table (billing/priced-text.ts): severity
 * and SQLSTATE kept, every field of the server's text (message, detail, hint, context, position, names) replaced
 * by a message that holds no value.
 */
export function pricedTableNotice(buffer: Buffer, start: number, end: number): Buffer {
  const fields = decodeNoticeFields(buffer.subarray(start + FRAME_HEADER_LENGTH, end));
  const error = buffer[start] === BackendCode.ErrorResponse;
  const code = fields.code ?? "XX000";
  const withheld: OutgoingNoticeFields = {
    severity: fields.severity ?? (error ? "ERROR" : "NOTICE"),
    code,
    message: withheldDatabaseText(code, error ? "error" : "notice"),
  };
  if (fields.severityNonLocalized) withheld.severityNonLocalized = fields.severityNonLocalized;
  return error ? encodeErrorResponse(withheld) : encodeNoticeResponse(withheld);
}
