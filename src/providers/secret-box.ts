import { createCipheriv, createDecipheriv, randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import { mkdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";

const VERSION = "v1";

/**
 * Encrypts small secrets (provider connection strings) at rest with AES-256-GCM. The stored form is
 * `v1:<base64 iv|tag|ciphertext>`; the key never leaves the process.
 */
export interface SecretBox {
  seal(plaintext: string): string;
  open(sealed: string): string;
}

export function createSecretBox(key: Buffer): SecretBox {
  if (key.length !== 32) throw new Error("the secret key must be 32 bytes");
  return {
    seal(plaintext) {
      const iv = randomBytes(12);
      const cipher = createCipheriv("aes-256-gcm", key, iv);
      const body = Buffer.concat([cipher.update(plaintext, "utf8"), cipher.final()]);
      return `${VERSION}:${Buffer.concat([iv, cipher.getAuthTag(), body]).toString("base64")}`;
    },
    open(sealed) {
      const [version, payload] = sealed.split(":", 2);
      if (version !== VERSION || !payload) throw new Error("unknown secret format");
      const raw = Buffer.from(payload, "base64");
      const decipher = createDecipheriv("aes-256-gcm", key, raw.subarray(0, 12));
      decipher.setAuthTag(raw.subarray(12, 28));
      try {
        return Buffer.concat([decipher.update(raw.subarray(28)), decipher.final()]).toString("utf8");
      } catch {
        throw new Error(
          "a stored secret could not be decrypted: PGTOLL_SECRET_KEY differs from the key it was sealed with",
        );
      }
    },
  };
}

/** The configured key, or the one in `<dataDir>/secret.key`, generated (mode 0600) on first start. */
export async function loadSecretKey(configured: Buffer | undefined, dataDir: string): Promise<Buffer> {
  if (configured) return configured;
  const file = join(dataDir, "secret.key");
  if (existsSync(file)) return Buffer.from((await readFile(file, "utf8")).trim(), "hex");
  await mkdir(dataDir, { recursive: true });
  const key = randomBytes(32);
  await writeFile(file, key.toString("hex"), { mode: 0o600, flag: "wx" });
  return key;
}
