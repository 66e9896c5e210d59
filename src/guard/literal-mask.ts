/**
 * The literal mask of a SQL text: the text with each small integer literal and each plain string literal
 * replaced by a tag, and where those literals are. Two texts with the same mask differ only in the values
 * of those literals, which lets the proxy reuse a verdict across `... WHERE aid = 1` and `... WHERE aid = 2`
 * (see verdict-shapes.ts for when that is sound).
 *
 * This is a scanner, not a parser, and it is deliberately narrow. It follows PostgreSQL's lexer
 * (scan.l, standard_conforming_strings on, as the guard parses) only as far as needed to know, at every
 * position, whether it is inside a comment, a quoted identifier or a string, and it gives up (null) on
 * anything it does not model exactly: dollar quotes, prefixed strings (E'', B'', X'', N'', U&''), a string
 * that could continue on the next line, unterminated comments or quotes, NUL. Only two kinds of token are
 * masked, each only when the characters around it make it exactly one token of a known type:
 * - a run of 1 to 9 decimal digits (always an ICONST: it fits an int4) not touching a letter, digit, `_`,
 *   `.`, `$` or non-ASCII character (which would make it part of an identifier, a numeric, a parameter);
 * - a plain `'...'` string (`''` inside is a quote), not preceded by a letter, digit, `_`, `$`, `&` or
 *   non-ASCII character (which would make it a prefixed string), whose next non-space character is neither
 *   `'` nor `-` (either could continue it as one SCONST across a newline).
 * Everything else is kept verbatim. The tag contains NUL, which no checked text contains.
 */
export interface LiteralMask {
  /** The text with every masked literal replaced by its tag. */
  key: string;
  /** [start, end) of each masked literal in the text (UTF-16 indices), flat and in order. */
  spans: number[];
}

export const INTEGER_TAG = "\0i";
export const STRING_TAG = "\0s";

/** Longest text masked: longer ones go to the guard as they are. */
export const MAX_MASKED_LENGTH = 8192;

const QUOTE = 0x27;
const DOUBLE_QUOTE = 0x22;
const DOLLAR = 0x24;
const MINUS = 0x2d;
const SLASH = 0x2f;
const STAR = 0x2a;
const DOT = 0x2e;
const AMPERSAND = 0x26;
const NUL = 0;

/** PostgreSQL's `space`: [ \t\n\r\f\v]. Other spaces (NBSP...) are identifier characters to it. */
function isSpace(c: number): boolean {
  return c === 0x20 || (c >= 0x09 && c <= 0x0d);
}

function isDigit(c: number): boolean {
  return c >= 0x30 && c <= 0x39;
}

/** `ident_start`: [A-Za-z\200-\377_] (every non-ASCII character). */
function isIdentStart(c: number): boolean {
  return (c >= 0x61 && c <= 0x7a) || (c >= 0x41 && c <= 0x5a) || c === 0x5f || c >= 0x80;
}

/** `ident_cont`: ident_start, digits and `$`. */
function isIdentCont(c: number): boolean {
  return isIdentStart(c) || isDigit(c) || c === DOLLAR;
}

/** Returns the mask of `sql`, or null when it has no masked literal or holds something not modelled. */
export function maskLiterals(sql: string): LiteralMask | null {
  const length = sql.length;
  if (length > MAX_MASKED_LENGTH) return null;
  const spans: number[] = [];
  let key = "";
  let copiedTo = 0;
  let i = 0;
  while (i < length) {
    const c = sql.charCodeAt(i);
    if (c === NUL) return null;
    if (isSpace(c)) {
      i++;
    } else if (c === MINUS && sql.charCodeAt(i + 1) === MINUS) {
      // `--` comment, to the end of the line (also inside an operator: comments win there too).
      i += 2;
      while (i < length) {
        const d = sql.charCodeAt(i);
        if (d === 0x0a || d === 0x0d) break;
        if (d === NUL) return null;
        i++;
      }
    } else if (c === SLASH && sql.charCodeAt(i + 1) === STAR) {
      i = skipBlockComment(sql, i);
      if (i < 0) return null;
    } else if (isIdentStart(c)) {
      i++;
      while (i < length && isIdentCont(sql.charCodeAt(i))) i++;
      const next = sql.charCodeAt(i);
      // E'..', B'..', X'..', N'..', U&'..' and U&".." are other token kinds.
      if (next === QUOTE || (next === AMPERSAND && sql.charCodeAt(i + 1) === QUOTE)) return null;
    } else if (isDigit(c) || (c === DOT && isDigit(sql.charCodeAt(i + 1)))) {
      const start = i;
      while (i < length && isDigit(sql.charCodeAt(i))) i++;
      const next = sql.charCodeAt(i);
      if (c !== DOT && i - start <= 9 && !(isIdentCont(next) || next === DOT)) {
        key += sql.slice(copiedTo, start) + INTEGER_TAG;
        copiedTo = i;
        spans.push(start, i);
      } else {
        // A numeric, a long integer, junk: kept verbatim. None of these characters opens a quote or comment.
        while (i < length && (isIdentCont(sql.charCodeAt(i)) || sql.charCodeAt(i) === DOT)) {
          if (sql.charCodeAt(i) === DOLLAR) return null;
          i++;
        }
      }
    } else if (c === QUOTE) {
      if (sql.charCodeAt(i - 1) === AMPERSAND) return null;
      const start = i;
      i = skipQuoted(sql, i, QUOTE);
      if (i < 0) return null;
      let after = i;
      while (after < length && isSpace(sql.charCodeAt(after))) after++;
      const next = sql.charCodeAt(after);
      if (next === QUOTE || next === MINUS) return null;
      key += sql.slice(copiedTo, start) + STRING_TAG;
      copiedTo = i;
      spans.push(start, i);
    } else if (c === DOUBLE_QUOTE) {
      i = skipQuoted(sql, i, DOUBLE_QUOTE);
      if (i < 0) return null;
    } else if (c === DOLLAR) {
      // `$1` is a parameter; anything else may open a dollar-quoted string.
      if (!isDigit(sql.charCodeAt(i + 1))) return null;
      i++;
      while (i < length && isIdentCont(sql.charCodeAt(i))) {
        if (sql.charCodeAt(i) === DOLLAR) return null;
        i++;
      }
    } else {
      i++;
    }
  }
  if (spans.length === 0) return null;
  return { key: key + sql.slice(copiedTo), spans };
}

/** Index after the quote closing the one at `start` (a doubled quote is part of the text), or -1. */
function skipQuoted(sql: string, start: number, quote: number): number {
  let i = start + 1;
  for (;;) {
    const end = sql.indexOf(String.fromCharCode(quote), i);
    if (end < 0) return -1;
    if (sql.charCodeAt(end + 1) !== quote) {
      return sql.lastIndexOf("\0", end) >= start ? -1 : end + 1;
    }
    i = end + 2;
  }
}

/** Index after the (nested) block comment opening at `start`, or -1 if it does not end or holds NUL. */
function skipBlockComment(sql: string, start: number): number {
  let depth = 1;
  let i = start + 2;
  while (i < sql.length) {
    const c = sql.charCodeAt(i);
    if (c === NUL) return -1;
    if (c === SLASH && sql.charCodeAt(i + 1) === STAR) {
      depth++;
      i += 2;
    } else if (c === STAR && sql.charCodeAt(i + 1) === SLASH) {
      depth--;
      i += 2;
      if (depth === 0) return i;
    } else {
      i++;
    }
  }
  return -1;
}
