import { createHash, createHmac, pbkdf2, randomBytes, timingSafeEqual } from "node:crypto";
import { promisify } from "node:util";
import { saslprep } from "./saslprep.js";

const pbkdf2Async = promisify(pbkdf2);

/** The SASL mechanism name a PostgreSQL server lists in AuthenticationSASL. */
export const SCRAM_SHA_256 = "SCRAM-SHA-256";

/** GS2 header for "no channel binding": we do not offer SCRAM-SHA-256-PLUS. */
const GS2_HEADER = "n,,";

/** The upstream server sent something SCRAM does not allow, or failed to prove it knows the key. */
export class ScramError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ScramError";
  }
}

export interface ScramClientOptions {
  /** PostgreSQL ignores the SCRAM user name (it uses the startup one), so the default is "". */
  username?: string;
  /** Fixed client nonce, for test vectors only: production nonces must be random. */
  nonce?: string;
  /**
   * Refuse servers asking for more PBKDF2 rounds than this (default 100000, PostgreSQL's default
   * is 4096): an upstream chosen by someone else must not be able to pin our CPU.
   */
  maxIterations?: number;
}

/**
 * Client side of SCRAM-SHA-256 (RFC 5802, RFC 7677), to authenticate pgtoll to an upstream server:
 *
 * 1. send `clientFirstMessage` in SASLInitialResponse (mechanism {@link SCRAM_SHA_256});
 * 2. pass AuthenticationSASLContinue data to `clientFinalMessage`, send the result in SASLResponse;
 * 3. pass AuthenticationSASLFinal data to `verifyServerFinal`: it throws unless the server proved
 *    it holds the verifier. Do not treat the upstream as authenticated before that.
 *
 * The key derivation runs on the libuv thread pool, not on the event loop.
 */
export class ScramSha256Client {
  readonly clientFirstMessage: string;
  private readonly clientFirstBare: string;
  private readonly clientNonce: string;
  private readonly maxIterations: number;
  private expectedServerSignature: Buffer | undefined;

  constructor(
    private readonly password: string,
    options: ScramClientOptions = {},
  ) {
    this.clientNonce = options.nonce ?? randomBytes(18).toString("base64");
    this.maxIterations = options.maxIterations ?? 100_000;
    const username = (options.username ?? "").replaceAll("=", "=3D").replaceAll(",", "=2C");
    this.clientFirstBare = `n=${username},r=${this.clientNonce}`;
    this.clientFirstMessage = GS2_HEADER + this.clientFirstBare;
  }

  /** Answers the server-first message with the client-final message (with proof). */
  async clientFinalMessage(serverFirstMessage: string | Uint8Array): Promise<string> {
    if (this.expectedServerSignature) throw new ScramError("server-first message already handled");
    const serverFirst = asText(serverFirstMessage);
    const attributes = parseAttributes(serverFirst, ["r", "s", "i"]);
    const nonce = attributes.get("r")!;
    if (!nonce.startsWith(this.clientNonce) || nonce.length === this.clientNonce.length) {
      throw new ScramError("server nonce does not extend the client nonce");
    }
    const salt = decodeBase64(attributes.get("s")!, "salt");
    const iterationsText = attributes.get("i")!;
    const iterations = Number(iterationsText);
    if (!/^[1-9]\d*$/.test(iterationsText) || iterations > this.maxIterations) {
      throw new ScramError(`unacceptable iteration count ${iterationsText}`);
    }

    const saltedPassword = await pbkdf2Async(saslprep(this.password), salt, iterations, 32, "sha256");
    const clientKey = hmac(saltedPassword, "Client Key");
    const storedKey = createHash("sha256").update(clientKey).digest();
    const withoutProof = `c=${Buffer.from(GS2_HEADER).toString("base64")},r=${nonce}`;
    const authMessage = `${this.clientFirstBare},${serverFirst},${withoutProof}`;
    const clientSignature = hmac(storedKey, authMessage);
    const proof = Buffer.alloc(clientKey.length);
    for (let i = 0; i < proof.length; i++) proof[i] = clientKey[i]! ^ clientSignature[i]!;
    this.expectedServerSignature = hmac(hmac(saltedPassword, "Server Key"), authMessage);
    return `${withoutProof},p=${proof.toString("base64")}`;
  }

  /** @throws ScramError on a server error ("e=...") or a wrong server signature */
  verifyServerFinal(serverFinalMessage: string | Uint8Array): void {
    if (!this.expectedServerSignature) throw new ScramError("server-final message before server-first");
    const serverFinal = asText(serverFinalMessage);
    if (serverFinal.startsWith("e="))
      throw new ScramError(`server rejected authentication: ${serverFinal.slice(2)}`);
    const signature = decodeBase64(parseAttributes(serverFinal, ["v"]).get("v")!, "server signature");
    if (
      signature.length !== this.expectedServerSignature.length ||
      !timingSafeEqual(signature, this.expectedServerSignature)
    ) {
      throw new ScramError("server signature does not match: the server does not know the password");
    }
  }
}

/** The response to AuthenticationMD5Password: "md5" + md5hex(md5hex(password + user) + salt). */
export function md5Password(user: string, password: string, salt: Uint8Array): string {
  const inner = createHash("md5").update(password, "utf8").update(user, "utf8").digest("hex");
  return `md5${createHash("md5").update(inner).update(salt).digest("hex")}`;
}

function hmac(key: Buffer, data: string): Buffer {
  return createHmac("sha256", key).update(data).digest();
}

function asText(message: string | Uint8Array): string {
  return typeof message === "string" ? message : Buffer.from(message).toString("utf8");
}

/** Reads `k=v` attributes that must start with `expected`, in order; extensions may follow. */
function parseAttributes(message: string, expected: readonly string[]): Map<string, string> {
  const parts = message.split(",");
  const attributes = new Map<string, string>();
  expected.forEach((key, i) => {
    const part = parts[i];
    if (part === undefined || !part.startsWith(`${key}=`)) {
      throw new ScramError(
        `malformed SCRAM message: expected attribute "${key}" in ${JSON.stringify(message)}`,
      );
    }
    attributes.set(key, part.slice(2));
  });
  return attributes;
}

function decodeBase64(text: string, what: string): Buffer {
  if (text.length === 0 || text.length % 4 !== 0 || !/^[A-Za-z0-9+/]*={0,2}$/.test(text)) {
    throw new ScramError(`malformed SCRAM ${what}`);
  }
  return Buffer.from(text, "base64");
}
