import { createHash, randomBytes, timingSafeEqual } from "node:crypto";

/** Prefix that makes a leaked provider key easy to recognise (and to scan for). */
const PREFIX = "pgt_";

/** A new random provider API key (256 bits) and the hash that is stored in its place. */
export function generateApiKey(): { key: string; hash: Buffer } {
  const key = `${PREFIX}${randomBytes(32).toString("base64url")}`;
  return { key, hash: hashApiKey(key) };
}

export function hashApiKey(key: string): Buffer {
  return createHash("sha256").update(key, "utf8").digest();
}

/** Compares a presented key with a stored hash in constant time. */
export function apiKeyMatches(presented: string, storedHash: Buffer): boolean {
  const hash = hashApiKey(presented);
  return hash.length === storedHash.length && timingSafeEqual(hash, storedHash);
}
