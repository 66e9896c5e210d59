import { cutForDisplay, normalizedShapeText } from "../guard/statement-shape.js";

/**
 * What a shape's `normalized` shows: the text with its constants replaced by `$1, $2, …`, normalised whole and
 * then cut for display; the text itself, cut, when it cannot be parsed (a sample cut before it was normalised, or
 * a text the guard refused), and never the parser's message.
 */
export function shapeText(text: string): string {
  return normalizedShapeText(text) ?? cutForDisplay(text);
}
