import { type Hex, recoverMessageAddress } from "viem";
import { privateKeyToAccount } from "viem/accounts";

/**
 * Agent tokens: the password an agent presents to the wire proxy (and, with PGTOLL_REST_AGENT_AUTH=signature,
 * to the REST gateway). A token is `pgtoll1.<unix seconds>.<wallet>.<EIP-191 signature>`, the signature over
 *
 *     pgtoll agent login
 *     provider: <provider id, lower case>
 *     issued: <unix seconds>
 *
 * made with the wallet's key. It proves control of the wallet for one provider and expires
 * `AGENT_TOKEN_LIFETIME_S` after it was issued. Warning: a token is a bearer credential for its lifetime;
 * send it only over TLS or loopback (the proxy enforces that).
 */
export const AGENT_TOKEN_PREFIX = "pgtoll1";
/** How long a token stays valid after it was issued. */
export const AGENT_TOKEN_LIFETIME_S = 3600;
/** How far in the future an issue time may be, for clocks that disagree. */
export const AGENT_TOKEN_CLOCK_SKEW_S = 300;

export function agentLoginMessage(providerId: string, issuedAt: number): string {
  return `pgtoll agent login\nprovider: ${providerId.toLowerCase()}\nissued: ${issuedAt}`;
}

/** Makes a token for `providerId` with the wallet key `privateKey`. */
export async function createAgentToken(
  privateKey: Hex,
  providerId: string,
  now = Date.now(),
): Promise<string> {
  const issuedAt = Math.floor(now / 1000);
  const account = privateKeyToAccount(privateKey);
  const signature = await account.signMessage({ message: agentLoginMessage(providerId, issuedAt) });
  return `${AGENT_TOKEN_PREFIX}.${issuedAt}.${account.address.toLowerCase()}.${signature}`;
}

export type AgentTokenCheck = { ok: true } | { ok: false; reason: string };

/**
 * The first instant (ms) at which {@link verifyAgentToken} calls `token` expired: more than its lifetime, in
 * whole seconds, after it was issued. Only meaningful for a token that verified.
 */
export function agentTokenExpiresAtMs(token: string): number {
  return expiresAtMs(Number(token.split(".")[1]));
}

function expiresAtMs(issuedAtSeconds: number): number {
  return (issuedAtSeconds + AGENT_TOKEN_LIFETIME_S + 1) * 1000;
}

/** Checks that `token` was signed by `wallet` for `providerId` and is within its validity window. */
export async function verifyAgentToken(
  token: string,
  wallet: string,
  providerId: string,
  now = Date.now(),
): Promise<AgentTokenCheck> {
  const read = await readToken(token, providerId, now);
  if (!read.ok) return read;
  const expected = wallet.toLowerCase();
  if (read.signer !== expected || (read.named !== null && read.named !== expected)) {
    return { ok: false, reason: "the agent token was not signed by this wallet for this provider" };
  }
  return { ok: true };
}

/**
 * The wallet that signed `token` for `providerId`, for a caller that has a bearer token and no wallet to check
 * it against (the remote MCP endpoint). The token must name its wallet: a signature checked against another
 * provider's message still recovers some address, so only the wallet named in the token tells a token for this
 * provider from one for another.
 */
export async function agentOfToken(
  token: string,
  providerId: string,
  now = Date.now(),
): Promise<{ ok: true; wallet: string } | { ok: false; reason: string }> {
  const read = await readToken(token, providerId, now);
  if (!read.ok) return read;
  if (!read.named)
    return { ok: false, reason: "the agent token names no wallet; make a new one with `pgtoll agent-token`" };
  if (read.signer !== read.named)
    return { ok: false, reason: "the agent token was not signed by the wallet it names for this provider" };
  return { ok: true, wallet: read.signer };
}

/** Tokens name their wallet; a token without one (three parts) is still accepted where the wallet is known. */
const TOKEN_SHAPE = /^pgtoll1\.(\d{1,12})\.(?:(0x[0-9a-fA-F]{40})\.)?(0x[0-9a-fA-F]{130})$/;

/** A token's issue time checked, and the address its signature recovers for `providerId`, in lower case. */
async function readToken(
  token: string,
  providerId: string,
  now: number,
): Promise<{ ok: true; signer: string; named: string | null } | { ok: false; reason: string }> {
  const parts = TOKEN_SHAPE.exec(token);
  if (!parts) {
    return {
      ok: false,
      reason: "the password is not a pgtoll agent token (make one with `pgtoll agent-token`)",
    };
  }
  const issuedAt = Number(parts[1]);
  const nowSeconds = Math.floor(now / 1000);
  if (issuedAt > nowSeconds + AGENT_TOKEN_CLOCK_SKEW_S)
    return { ok: false, reason: "the agent token is issued in the future" };
  if (now >= expiresAtMs(issuedAt))
    return { ok: false, reason: "the agent token has expired; make a new one" };
  const key = `${providerId}\n${issuedAt}\n${parts[3]}`;
  let signer = recoveredSigners.get(key);
  if (signer === undefined) {
    try {
      signer = (
        await recoverMessageAddress({
          message: agentLoginMessage(providerId, issuedAt),
          signature: parts[3] as Hex,
        })
      ).toLowerCase();
    } catch {
      return { ok: false, reason: "the agent token's signature is malformed" };
    }
    rememberSigner(key, signer);
  }
  return { ok: true, signer, named: parts[2]?.toLowerCase() ?? null };
}

/**
 * Signers recovered from tokens, by provider, issue time and signature: recovering one costs milliseconds of CPU
 * (secp256k1), and an agent presents the same token at every connection of its hour, so a client reconnecting
 * in a loop would otherwise cost pgtoll that much each time. The recovery is a pure function of the key; the
 * expiry is still checked on every use. Bounded: the oldest entries make room.
 */
const recoveredSigners = new Map<string, string>();
const MAX_REMEMBERED_SIGNERS = 10_000;

function rememberSigner(key: string, signer: string): void {
  if (recoveredSigners.size >= MAX_REMEMBERED_SIGNERS)
    recoveredSigners.delete(recoveredSigners.keys().next().value as string);
  recoveredSigners.set(key, signer);
}
