/**
 * Money is an integer count of micro-USDC (6 decimals) held in a `bigint`; it is never a float.
 * These are the only conversions between that integer and text.
 */
export const MICRO_PER_USDC = 1_000_000n;

/** Formats micro-USDC as a decimal string with exactly 6 places: 1500000n -> "1.500000", -1000n -> "-0.001000". */
export function formatMicro(micro: bigint): string {
  const negative = micro < 0n;
  const abs = negative ? -micro : micro;
  const whole = abs / MICRO_PER_USDC;
  const fraction = (abs % MICRO_PER_USDC).toString().padStart(6, "0");
  return `${negative ? "-" : ""}${whole}.${fraction}`;
}

/** Parses a decimal string with at most 6 places ("12.5", "0.000001") into micro-USDC; null when malformed. */
export function parseMicro(text: string): bigint | null {
  const match = /^(-)?(\d+)(?:\.(\d{1,6}))?$/.exec(text);
  if (!match) return null;
  const [, sign, whole = "0", fraction = ""] = match;
  const micro = BigInt(whole) * MICRO_PER_USDC + BigInt(fraction.padEnd(6, "0"));
  return sign ? -micro : micro;
}

/**
 * Converts a JSON number with at most 6 decimals into micro units, exactly; null when it has more decimals,
 * is not finite, or is too large to be represented exactly.
 */
export function numberToMicro(value: number): bigint | null {
  if (!Number.isFinite(value)) return null;
  const scaled = Math.round(value * 1_000_000);
  if (!Number.isSafeInteger(scaled) || scaled / 1_000_000 !== value) return null;
  return BigInt(scaled);
}

/** micro units back to a JS number, for values known to be small and exact (prices, multipliers). */
export function microToNumber(micro: bigint): number {
  return Number(micro) / 1_000_000;
}
