import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import type { ClientConfig } from "pg";
import type { Address } from "viem";
import { privateKeyToAddress } from "viem/accounts";
import { parseMicro } from "../billing/money.js";
import { takeFlags, UsageError, unexpectedArgument } from "../command-flags.js";
import { optionSpecs } from "../config.js";
import { getJson, RestCallError } from "../dev/rest-client.js";
import { readAgentKey } from "../proxy/agent-token-command.js";
import { isLoopback } from "../proxy/loopback.js";
import { AgentTokens } from "./agent-tokens.js";
import { type CatalogBackend, registerCatalogTools } from "./catalog-tools.js";
import { chainDeposit } from "./chain-deposit.js";
import { registerPgtollTools } from "./pgtoll-tools.js";
import { ProxySession } from "./proxy-session.js";
import type { AgentBackend, DailyLimitView, LedgerEntryView } from "./tool-runs.js";

export const MCP_USAGE = `Usage: PGTOLL_AGENT_KEY=0x<64 hex digits> pgtoll mcp --provider ID [--url HTTP_URL] [--proxy POSTGRES_URL]
       pgtoll mcp [--url HTTP_URL]

Without --provider: the free catalog tools (search_providers, describe_provider) on pgtoll's HTTP API; no key.

A Model Context Protocol server on stdin/stdout, for an agent host to run: the agent queries provider ID
through pgtoll's wire proxy on one session, opened when a tool needs it, metered from its balance.
  --url     pgtoll's HTTP API (transactions, deposits); default http://127.0.0.1:3000
  --proxy   pgtoll's wire proxy; default postgres://127.0.0.1:6543 (TLS unless loopback or ?sslmode=disable)
Environment: PGTOLL_AGENT_KEY (required, never on the command line); PGTOLL_MCP_ALLOW_DEPOSIT=on adds the
deposit tool, which sends up to PGTOLL_MCP_DEPOSIT_MAX USDC (default 10) per call on PGTOLL_RPC_URL,
PGTOLL_CHAIN_ID and PGTOLL_TOKEN_ADDRESS; PGTOLL_MCP_PROXY_IDLE_MS (default 10000) is how long the proxy
session is kept after the last call that needed it.
`;

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const DEFAULT_DEPOSIT_MAX = "10";

/** Host, port and TLS of the proxy from `postgres://host:port[?sslmode=...]`. */
export function proxyEndpoint(proxyUrl: string): { host: string; port: number; ssl: ClientConfig["ssl"] } {
  let url: URL;
  try {
    url = new URL(proxyUrl);
  } catch {
    throw new UsageError(`--proxy must be a URL such as postgres://127.0.0.1:6543, got "${proxyUrl}"`);
  }
  if (url.protocol !== "postgres:" && url.protocol !== "postgresql:")
    throw new UsageError(`--proxy must start with postgres://, got "${proxyUrl}"`);
  const host = url.hostname.replace(/^\[|\]$/g, "");
  const local = isLoopback(host) || host === "localhost";
  const sslmode = url.searchParams.get("sslmode") ?? (local ? "disable" : "verify-full");
  const ssl: ClientConfig["ssl"] =
    sslmode === "disable"
      ? false
      : { rejectUnauthorized: sslmode === "verify-full" || sslmode === "verify-ca" };
  return { host, port: Number(url.port || 5432), ssl };
}

function httpBase(raw: string): string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new UsageError(`--url must be pgtoll's HTTP URL such as http://127.0.0.1:3000, got "${raw}"`);
  }
  if (url.protocol !== "http:" && url.protocol !== "https:")
    throw new UsageError(`--url must start with http:// or https://, got "${raw}"`);
  return url.origin;
}

/** The stdio server's tools, wired to the proxy and REST API named on the command line. */
export function stdioBackend(argv: readonly string[], env: NodeJS.ProcessEnv): AgentBackend {
  const flags = { provider: "value", url: "value", proxy: "value" } as const;
  const { values, rest } = takeFlags(argv, flags);
  if (rest.length > 0) throw unexpectedArgument(rest, Object.keys(flags), MCP_USAGE);
  const providerId = String(values.provider ?? "");
  if (!UUID.test(providerId))
    throw new UsageError(`--provider must be a provider id (a UUID)\n\n${MCP_USAGE}`);
  const key = readAgentKey(env);
  const wallet = privateKeyToAddress(key).toLowerCase();
  const httpUrl = httpBase(String(values.url ?? "http://127.0.0.1:3000"));
  const tokens = new AgentTokens(key, providerId);
  const session = new ProxySession({
    ...proxyEndpoint(String(values.proxy ?? "postgres://127.0.0.1:6543")),
    wallet,
    providerId,
    token: () => tokens.current(),
    idleMs: optionSpecs.mcpProxyIdleMs.parse(env.PGTOLL_MCP_PROXY_IDLE_MS),
  });
  const backend: AgentBackend = {
    providerId,
    wallet,
    session,
    // The proxy answers them; an agent it refuses for want of funds gets them from the refusal.
    account: () => session.account(),
    async transactions(limit) {
      const answer = await getJson<{ transactions: LedgerEntryView[] }>(
        `${httpUrl}/api/transactions/${wallet}?providerId=${providerId}&limit=${limit}`,
        { authorization: `Bearer ${await tokens.current()}` },
      );
      return answer.transactions;
    },
    async dailyLimit() {
      const { dailyLimit, spentToday, remainingToday, resetsAt } = await getJson<DailyLimitView>(
        `${httpUrl}/api/agents/${wallet}/limits/${providerId}`,
        { authorization: `Bearer ${await tokens.current()}` },
      );
      return { dailyLimit, spentToday, remainingToday, resetsAt };
    },
  };
  if (env.PGTOLL_MCP_ALLOW_DEPOSIT === "on") {
    const maxText = env.PGTOLL_MCP_DEPOSIT_MAX?.trim() || DEFAULT_DEPOSIT_MAX;
    const maxMicro = parseMicro(maxText);
    if (maxMicro === null || maxMicro <= 0n)
      throw new UsageError(`PGTOLL_MCP_DEPOSIT_MAX must be a positive USDC amount, got "${maxText}"`);
    backend.deposit = chainDeposit({
      chain: {
        rpcUrl: optionSpecs.rpcUrl.parse(env.PGTOLL_RPC_URL),
        chainId: optionSpecs.chainId.parse(env.PGTOLL_CHAIN_ID),
        tokenAddress: optionSpecs.tokenAddress.parse(env.PGTOLL_TOKEN_ADDRESS) as Address,
      },
      agentKey: key,
      providerId,
      httpUrl,
      maxMicro,
      depositAddress: async () => (await session.account()).depositAddress,
      token: () => tokens.current(),
    });
  }
  return backend;
}

/** The catalog read through pgtoll's HTTP API at `httpUrl` (`GET /api/providers`, `GET /api/providers/:id`). */
export function httpCatalog(httpUrl: string): CatalogBackend {
  return {
    search({ q, tag, maxPricePer1000Rows, limit, cursor }) {
      const query = new URLSearchParams();
      for (const [name, value] of Object.entries({ q, tag, maxPricePer1000Rows, limit, cursor }))
        if (value !== undefined && value !== "") query.set(name, String(value));
      return getJson(`${httpUrl}/api/providers?${query}`);
    },
    async describe(providerId) {
      try {
        return await getJson(`${httpUrl}/api/providers/${encodeURIComponent(providerId)}`);
      } catch (error) {
        if (error instanceof RestCallError && error.status === 404) return null;
        throw error;
      }
    },
  };
}

/** Whether the command names a provider (else it serves the catalog tools alone). */
function namesProvider(argv: readonly string[]): boolean {
  return argv.some((arg) => arg === "--provider" || arg.startsWith("--provider="));
}

/** `pgtoll mcp`: serves until the host closes stdin, then ends the proxy session (its charges written). */
export async function mcpCommand(argv: readonly string[], env: NodeJS.ProcessEnv): Promise<void> {
  if (!namesProvider(argv)) return catalogCommand(argv);
  const backend = stdioBackend(argv, env);
  const server = new McpServer({ name: "pgtoll", version: "1" }, { capabilities: { logging: {} } });
  registerPgtollTools(server, backend);
  const transport = new StdioServerTransport();
  const closed = new Promise<void>((resolve) => {
    transport.onclose = () => resolve();
    process.stdin.once("end", () => resolve());
  });
  await server.connect(transport);
  await closed;
  await backend.session.close();
  await server.close();
}

/** `pgtoll mcp` without a provider: the catalog tools alone, until the host closes stdin. */
async function catalogCommand(argv: readonly string[]): Promise<void> {
  const { values, rest } = takeFlags(argv, { url: "value" });
  if (rest.length > 0) throw new UsageError(`unexpected argument "${rest[0]}"\n\n${MCP_USAGE}`);
  const server = new McpServer({ name: "pgtoll-catalog", version: "1" });
  registerCatalogTools(server, httpCatalog(httpBase(String(values.url ?? "http://127.0.0.1:3000"))));
  const transport = new StdioServerTransport();
  const closed = new Promise<void>((resolve) => {
    transport.onclose = () => resolve();
    process.stdin.once("end", () => resolve());
  });
  await server.connect(transport);
  await closed;
  await server.close();
}
