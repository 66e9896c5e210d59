import { createHash, createHmac, pbkdf2, randomBytes, timingSafeEqual } from "node:crypto";
import { promisify } from "node:util";
import { saslprep } from "./saslprep.js";
import { SCRAM_SHA_256 } from "./scram-client.js";

const pbkdf2Async = promisify(pbkdf2);

export const SCRAM_SHA_256_PLUS = "SCRAM-SHA-256-PLUS";
/** The only channel binding type PostgreSQL defines. */
const CHANNEL_BINDING_TYPE = "tls-server-end-point";

/** The client broke the SCRAM exchange (not a wrong password: that is `verifyClientFinal` returning null). */
export class ScramProtocolError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ScramProtocolError";
  }
}

export interface ScramServerOptions {
  /**
   * The role's password, or null for a role that does not exist or cannot log in: the exchange then runs to
   * the end with a random password and fails like a wrong password, so a client cannot tell the difference.
   */
  password: string | null;
  /**
   * `tls-server-end-point` data (the hash of this server's certificate) when the session is on TLS: then
   * SCRAM-SHA-256-PLUS is offered, and a client that says it supports channel binding must use it.
   */
  channelBinding: Buffer | null;
  /** PBKDF2 rounds (PostgreSQL's default, 4096). */
  iterations?: number;
}

/**
 * Server side of SCRAM-SHA-256 and SCRAM-SHA-256-PLUS (RFC 5802, RFC 7677, RFC 5929), as PostgreSQL runs it:
 * `mechanisms` go in AuthenticationSASL, `serverFirstMessage` answers the SASLInitialResponse,
 * `verifyClientFinal` checks the client's proof (and channel binding) and returns the server-final message,
 * or null when the password was wrong.
 */
export class ScramServer {
  readonly mechanisms: readonly string[];
  #clientFirstBare = "";
  #serverFirst = "";
  #gs2Header = "";
  #nonce = "";
  #storedKey: Buffer = Buffer.alloc(0);
  #serverKey: Buffer = Buffer.alloc(0);

  constructor(private readonly options: ScramServerOptions) {
    this.mechanisms = options.channelBinding ? [SCRAM_SHA_256_PLUS, SCRAM_SHA_256] : [SCRAM_SHA_256];
  }

  async serverFirstMessage(mechanism: string, clientFirst: string): Promise<string> {
    if (!this.mechanisms.includes(mechanism))
      throw new ScramProtocolError(`SASL mechanism ${mechanism} is not offered`);
    // gs2-header: "p=tls-server-end-point,," | "y,," | "n,," ; no authzid
    const match = /^(p=([^,]*)|y|n),,(.*)$/s.exec(clientFirst);
    if (!match) throw new ScramProtocolError("malformed SCRAM client-first message");
    const [, flag, bindingType, bare] = match as unknown as [string, string, string | undefined, string];
    if (mechanism === SCRAM_SHA_256_PLUS) {
      if (bindingType !== CHANNEL_BINDING_TYPE)
        throw new ScramProtocolError(`unsupported SCRAM channel binding type "${bindingType ?? flag}"`);
    } else if (flag.startsWith("p=")) {
      throw new ScramProtocolError("channel binding requested with SCRAM-SHA-256 (use SCRAM-SHA-256-PLUS)");
    } else if (flag === "y" && this.options.channelBinding) {
      // The client could have bound the channel but believed we could not: someone stripped -PLUS on the way.
      throw new ScramProtocolError("SCRAM channel binding negotiation error");
    }
    const fields = /^n=[^,]*,r=([\x21-\x2b\x2d-\x7e]+)(,.*)?$/s.exec(bare);
    if (!fields) throw new ScramProtocolError("malformed SCRAM client-first-bare message");
    this.#gs2Header = `${flag},,`;
    this.#clientFirstBare = bare;
    this.#nonce = fields[1] + randomBytes(18).toString("base64");
    const salt = randomBytes(16);
    const iterations = this.options.iterations ?? 4096;
    const password = this.options.password ?? randomBytes(32).toString("base64");
    const salted = await pbkdf2Async(saslprep(password), salt, iterations, 32, "sha256");
    this.#storedKey = createHash("sha256").update(hmac(salted, "Client Key")).digest();
    this.#serverKey = hmac(salted, "Server Key");
    this.#serverFirst = `r=${this.#nonce},s=${salt.toString("base64")},i=${iterations}`;
    return this.#serverFirst;
  }

  /** The server-final message (`v=<signature>`), or null when the client's proof is wrong. */
  verifyClientFinal(clientFinal: string): string | null {
    const match = /^(c=([^,]*),r=([^,]*)(?:,[^,]*)*?),p=([A-Za-z0-9+/=]+)$/s.exec(clientFinal);
    if (!match) throw new ScramProtocolError("malformed SCRAM client-final message");
    const [, withoutProof, binding, nonce, proof] = match as unknown as [
      string,
      string,
      string,
      string,
      string,
    ];
    const expectedBinding = Buffer.concat([
      Buffer.from(this.#gs2Header),
      this.#gs2Header.startsWith("p=") ? (this.options.channelBinding ?? Buffer.alloc(0)) : Buffer.alloc(0),
    ]).toString("base64");
    if (binding !== expectedBinding) throw new ScramProtocolError("SCRAM channel binding check failed");
    if (nonce !== this.#nonce) throw new ScramProtocolError("SCRAM nonce mismatch");
    const authMessage = `${this.#clientFirstBare},${this.#serverFirst},${withoutProof}`;
    const clientProof = Buffer.from(proof, "base64");
    const signature = hmac(this.#storedKey, authMessage);
    if (clientProof.length !== signature.length) return null;
    const clientKey = Buffer.alloc(signature.length);
    for (let i = 0; i < signature.length; i++) clientKey[i] = clientProof[i]! ^ signature[i]!;
    const candidate = createHash("sha256").update(clientKey).digest();
    if (!timingSafeEqual(candidate, this.#storedKey) || this.options.password === null) return null;
    return `v=${hmac(this.#serverKey, authMessage).toString("base64")}`;
  }
}

function hmac(key: Buffer, text: string): Buffer {
  return createHmac("sha256", key).update(text).digest();
}
