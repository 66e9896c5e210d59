import { fingerprintSync, normalizeSync, parseSync } from "libpg-query";
import { maskLiterals } from "./literal-mask.js";

/** Texts longer than this are fingerprinted every time rather than remembered (as the verdict cache does). */
const MAX_REMEMBERED_TEXT = 8192;

/** The shape given to a text the parser cannot read (it was refused or failed upstream anyway). */
export const UNPARSED_SHAPE = "unparsed";

/**
 * The shape of statements, libpg-query's fingerprint (the same for texts that differ only in constants,
 * whitespace or comments), memoised so that a ledger entry summing thousands of statements costs a few map
 * lookups. Simple-protocol clients inline their values, so each text may be new: the memo is also keyed by the
 * text's literal mask (guard/literal-mask.ts), which is the same for such texts and needs no parse. Bounded:
 * each map starts over when full.
 */
export class StatementShapes {
  readonly #byText = new Map<string, string>();
  readonly #byMask = new Map<string, string>();

  constructor(private readonly maxEntries = 10_000) {}

  /** The fingerprint of `sql`, a hex string, or {@link UNPARSED_SHAPE}. */
  fingerprint(sql: string): string {
    const known = this.#byText.get(sql);
    if (known) return known;
    const mask = maskLiterals(sql);
    let shape = mask ? this.#byMask.get(mask.key) : undefined;
    if (!shape) {
      shape = fingerprintOf(sql);
      if (mask) remember(this.#byMask, mask.key, shape, this.maxEntries);
    }
    if (sql.length <= MAX_REMEMBERED_TEXT) remember(this.#byText, sql, shape, this.maxEntries);
    return shape;
  }
}

function fingerprintOf(sql: string): string {
  try {
    return fingerprintSync(sql);
  } catch {
    return UNPARSED_SHAPE;
  }
}

function remember(map: Map<string, string>, key: string, value: string, maxEntries: number): void {
  if (map.size >= maxEntries) map.clear();
  map.set(key, value);
}

/** Longest statement text shown for a shape (ledger samples, the console's Top statements). */
export const MAX_SHAPE_TEXT = 200;

/** `text` cut to at most `max` characters, an ellipsis marking the cut. */
export function cutForDisplay(text: string, max = MAX_SHAPE_TEXT): string {
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
}

/**
 * `sql` with its constants replaced by `$1, $2, …` (libpg-query's normalisation), the whole text normalised and
 * only then cut to `max` characters; `undefined` when the text does not parse. The text is parsed first because
 * for some broken texts (a string literal left open) the normaliser returns the parser's error message as if it
 * were the statement rather than throwing.
 */
export function normalizedShapeText(sql: string, max = MAX_SHAPE_TEXT): string | undefined {
  try {
    parseSync(sql);
    return cutForDisplay(normalizeSync(sql).trim(), max);
  } catch {
    return undefined;
  }
}
