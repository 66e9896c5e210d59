import { type Hex, recoverMessageAddress } from "viem";
import { privateKeyToAccount } from "viem/accounts";

/**
 * Agent tokens: the password an agent presents to the wire proxy (and, with PGTOLL_REST_AGENT_AUTH=signature,
 * to the REST gateway). A token is `pgtoll1.<unix seconds>.<EIP-191 signature>` over the message
 *
 *     pgtoll agent login
 *     provider: <provider id, lower case>
 *     issued: <unix seconds>
 *
 * signed with the wallet's key. It proves control of the wallet for one provider and expires
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
  const signature = await privateKeyToAccount(privateKey).signMessage({
    message: agentLoginMessage(providerId, issuedAt),
  });
  return `${AGENT_TOKEN_PREFIX}.${issuedAt}.${signature}`;
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
  const signer = await agentOfToken(token, providerId, now);
  if (!signer.ok) return signer;
  if (signer.wallet.toLowerCase() !== wallet.toLowerCase()) {
    return { ok: false, reason: "the agent token was not signed by this wallet for this provider" };
  }
  return { ok: true };
}

/**
 * The wallet that signed `token` for `providerId`, when the token is well formed and within its validity
 * window: for a caller that has a bearer token and no wallet to check it against (the remote MCP endpoint).
 * Warning: a token signed for another provider yields some other address, not an error; only compare it.
 */
export async function agentOfToken(
  token: string,
  providerId: string,
  now = Date.now(),
): Promise<{ ok: true; wallet: string } | { ok: false; reason: string }> {
  const parts = token.split(".");
  if (
    parts.length !== 3 ||
    parts[0] !== AGENT_TOKEN_PREFIX ||
    !/^\d{1,12}$/.test(parts[1] ?? "") ||
    !/^0x[0-9a-fA-F]{130}$/.test(parts[2] ?? "")
  ) {
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
  try {
    const wallet = await recoverMessageAddress({
      message: agentLoginMessage(providerId, issuedAt),
      signature: parts[2] as Hex,
    });
    return { ok: true, wallet: wallet.toLowerCase() };
  } catch {
    return { ok: false, reason: "the agent token's signature is malformed" };
  }
}
