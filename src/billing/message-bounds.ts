/**
 * The most bytes of database text (an error's or a notice's message, detail or hint) an agent receives per field.
 * Error text can carry data (`SELECT (json_agg(t)::text)::int FROM t` fails with the whole table in its message),
 * so it is bounded, and a message carrying it is charged as one row.
 */
export const DATABASE_TEXT_LIMIT = 256;

/** Names (schema, table, column, type, constraint) are identifiers: at most 63 bytes in PostgreSQL. */
export const DATABASE_NAME_LIMIT = 64;

const ELLIPSIS = "…";
const ELLIPSIS_BYTES = Buffer.byteLength(ELLIPSIS);

/**
 * `text` cut to at most `limitBytes` bytes of UTF-8, ending with "…" when it was cut; never splits a character.
 */
export function boundText(text: string, limitBytes = DATABASE_TEXT_LIMIT): string {
  // Characters are at most 3 bytes per UTF-16 unit: text this short cannot exceed the limit.
  if (text.length * 3 <= limitBytes) return text;
  const bytes = Buffer.from(text, "utf8");
  if (bytes.length <= limitBytes) return text;
  let end = limitBytes - ELLIPSIS_BYTES;
  // Back up to the start of a character (continuation bytes are 10xxxxxx).
  while (end > 0 && (bytes[end]! & 0xc0) === 0x80) end--;
  return bytes.toString("utf8", 0, end) + ELLIPSIS;
}
