/**
 * Whether `name` names UTF8 the way PostgreSQL reads an encoding name: case and every character that is not a
 * letter or digit ignored (`UTF8`, `utf-8`, `Unicode`, `UTF_8`). Agent sessions are UTF-8 end to end: the guard
 * parses the bytes as UTF-8, and with any other client encoding the server would split them into characters
 * differently (in SJIS, `81 5C` is one character that swallows a backslash).
 */
export function isUtf8EncodingName(name: string): boolean {
  const folded = name.toLowerCase().replace(/[^a-z0-9]/g, "");
  return folded === "utf8" || folded === "unicode";
}
