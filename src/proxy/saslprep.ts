/*
 * SASLprep (RFC 4013) as PostgreSQL applies it to SCRAM passwords: ASCII passes through; otherwise
 * map, NFKC-normalize and, if a prohibited code point remains, fall back to the raw password (the
 * server does the same when it stores the verifier, so both sides agree).
 *
 * Two approximations, relevant only to exotic non-ASCII passwords: "unassigned" follows the
 * runtime's Unicode version instead of Unicode 3.2, and the bidirectional check is not performed.
 */

type Range = readonly [number, number];

// RFC 3454 C.1.2
const NON_ASCII_SPACES: Range[] = [
  [0xa0, 0xa0],
  [0x1680, 0x1680],
  [0x2000, 0x200b],
  [0x202f, 0x202f],
  [0x205f, 0x205f],
  [0x3000, 0x3000],
];

// RFC 3454 B.1
const MAPPED_TO_NOTHING: Range[] = [
  [0xad, 0xad],
  [0x34f, 0x34f],
  [0x1806, 0x1806],
  [0x180b, 0x180d],
  [0x200b, 0x200d],
  [0x2060, 0x2060],
  [0xfe00, 0xfe0f],
  [0xfeff, 0xfeff],
];

// RFC 3454 C.1.2 through C.9 (C.4 non-characters are handled arithmetically below).
const PROHIBITED: Range[] = [
  ...NON_ASCII_SPACES,
  [0x0, 0x1f],
  [0x7f, 0x9f],
  [0x340, 0x341],
  [0x6dd, 0x6dd],
  [0x70f, 0x70f],
  [0x180e, 0x180e],
  [0x200c, 0x200f],
  [0x2028, 0x202e],
  [0x2060, 0x2063],
  [0x206a, 0x206f],
  [0x2ff0, 0x2ffb],
  [0xd800, 0xf8ff],
  [0xfdd0, 0xfdef],
  [0xfeff, 0xfeff],
  [0xfff9, 0xfffd],
  [0x1d173, 0x1d17a],
  [0xe0001, 0xe0001],
  [0xe0020, 0xe007f],
  [0xf0000, 0xffffd],
  [0x100000, 0x10fffd],
];

const UNASSIGNED = /\p{Cn}/u;

const inRanges = (code: number, ranges: readonly Range[]): boolean =>
  ranges.some(([low, high]) => code >= low && code <= high);

const isNonCharacter = (code: number): boolean => (code & 0xfffe) === 0xfffe;

/** The string PostgreSQL derives SCRAM keys from for this password. */
export function saslprep(password: string): string {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: the ASCII range is the point
  if (/^[\x00-\x7f]*$/.test(password)) return password;
  let mapped = "";
  for (const char of password) {
    const code = char.codePointAt(0)!;
    if (inRanges(code, NON_ASCII_SPACES)) mapped += " ";
    else if (!inRanges(code, MAPPED_TO_NOTHING)) mapped += char;
  }
  const normalized = mapped.normalize("NFKC");
  for (const char of normalized) {
    const code = char.codePointAt(0)!;
    if (inRanges(code, PROHIBITED) || isNonCharacter(code) || UNASSIGNED.test(char)) return password;
  }
  return normalized;
}
