import { createHash } from "node:crypto";
import { randomString } from "./ids.js";

/**
 * A management API key: 64 random characters of [a-z0-9] (about 330 bits), the shape of Neon's keys.
 * Only its SHA-256 is stored; the token itself is shown once, in the creation response.
 */
export function newApiKeyToken(): string {
  return randomString(64);
}

export function hashApiKeyToken(token: string): Buffer {
  return createHash("sha256").update(token, "utf8").digest();
}
