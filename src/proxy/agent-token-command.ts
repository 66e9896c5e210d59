import type { Hex } from "viem";
import { privateKeyToAddress } from "viem/accounts";
import { takeFlags, UsageError, unexpectedArgument } from "../command-flags.js";
import { AGENT_TOKEN_LIFETIME_S, createAgentToken } from "./agent-token.js";

/** The environment variable `pgtoll agent-token` reads the agent's wallet key from. */
export const AGENT_KEY_VARIABLE = "PGTOLL_AGENT_KEY";

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export const AGENT_TOKEN_USAGE = `Usage: ${AGENT_KEY_VARIABLE}=0x<64 hex digits> pgtoll agent-token --provider ID [--url PROXY_URL]

Prints an agent token for provider ID: the password the wire proxy (and the REST gateway with
PGTOLL_REST_AGENT_AUTH=signature) accepts from the key's wallet for ${AGENT_TOKEN_LIFETIME_S / 60} minutes.
  --url postgres://HOST:PORT   print a full connection URL for that proxy instead of the bare token
`;

/**
 * Reads the agent's wallet private key from `env[PGTOLL_AGENT_KEY]`: `0x` and 64 hex digits.
 * Throws a {@link UsageError} naming the variable when it is missing or malformed (never echoing its value).
 */
export function readAgentKey(env: NodeJS.ProcessEnv): Hex {
  const raw = env[AGENT_KEY_VARIABLE]?.trim();
  if (!raw)
    throw new UsageError(`${AGENT_KEY_VARIABLE} is not set: put the agent wallet's private key in it`);
  if (!/^0x[0-9a-fA-F]{64}$/.test(raw)) {
    throw new UsageError(`${AGENT_KEY_VARIABLE} must be a private key: 0x followed by 64 hex digits`);
  }
  return raw as Hex;
}

/** `postgres://wallet:token@host:port/provider` for the proxy at `proxyUrl`. */
export function agentConnectionUrl(
  proxyUrl: string,
  wallet: string,
  token: string,
  providerId: string,
): string {
  let url: URL;
  try {
    url = new URL(proxyUrl);
  } catch {
    throw new UsageError(
      `--url must be the proxy's URL, such as postgres://127.0.0.1:6543, got "${proxyUrl}"`,
    );
  }
  if (url.protocol !== "postgres:" && url.protocol !== "postgresql:") {
    throw new UsageError(`--url must start with postgres://, got "${proxyUrl}"`);
  }
  url.username = wallet;
  url.password = token;
  url.pathname = `/${providerId}`;
  return url.toString();
}

/**
 * `pgtoll agent-token --provider ID [--url PROXY_URL]`: returns the one line to print, the token (or the
 * connection URL), signed with the key in `PGTOLL_AGENT_KEY`.
 * Warning: the output is a bearer credential for an hour; do not log it.
 */
export async function agentTokenCommand(
  argv: readonly string[],
  env: NodeJS.ProcessEnv,
  now = Date.now(),
): Promise<string> {
  const flags = { provider: "value", url: "value", help: "boolean" } as const;
  const { values, rest } = takeFlags(argv, flags);
  if (values.help) return AGENT_TOKEN_USAGE.trimEnd();
  if (rest.length > 0) throw unexpectedArgument(rest, Object.keys(flags), AGENT_TOKEN_USAGE);
  const provider = values.provider;
  if (typeof provider !== "string") throw new UsageError(`--provider is required\n\n${AGENT_TOKEN_USAGE}`);
  if (!UUID.test(provider))
    throw new UsageError(`--provider must be a provider id (a UUID), got "${provider}"`);
  const providerId = provider.toLowerCase();
  const key = readAgentKey(env);
  const token = await createAgentToken(key, providerId, now);
  if (typeof values.url !== "string") return token;
  return agentConnectionUrl(values.url, privateKeyToAddress(key).toLowerCase(), token, providerId);
}
