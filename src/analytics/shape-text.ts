import { normalizeSync } from "libpg-query";

/**
 * A statement's text with its constants replaced by `$1, $2, …` (libpg-query's normalisation, the parser
 * loaded by the guard); the sample itself when it cannot be parsed (a sample cut at 200 characters, or a text
 * the guard refused).
 */
export function shapeText(sample: string): string {
  try {
    return normalizeSync(sample);
  } catch {
    return sample;
  }
}
