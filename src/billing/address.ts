import { getAddress, isAddress } from "viem";

/**
 * Normalises an Ethereum address to lower case for storage and comparison. Accepts all-lower, all-upper and
 * correctly checksummed (EIP-55) mixed-case spellings; returns null for anything else, including a mixed-case
 * address whose checksum is wrong (a likely typo).
 */
export function normalizeAddress(value: unknown): `0x${string}` | null {
  if (typeof value !== "string" || !/^0x[0-9a-fA-F]{40}$/.test(value)) return null;
  const hex = value.slice(2);
  const mixedCase = hex !== hex.toLowerCase() && hex !== hex.toUpperCase();
  if (mixedCase && !isAddress(value, { strict: true })) return null;
  return value.toLowerCase() as `0x${string}`;
}

/** The EIP-55 checksummed spelling, which the API returns. */
export function checksumAddress(address: string): `0x${string}` {
  return getAddress(address);
}
