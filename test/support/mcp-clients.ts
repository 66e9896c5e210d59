import { fileURLToPath } from "node:url";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { runSql } from "./database.js";

const root = fileURLToPath(new URL("../..", import.meta.url));

/**
 * `pgtoll mcp` as an agent host runs it, from the sources, with the SDK's own client: the agent whose key is
 * `agentKey` on provider `providerId`, through pgtoll's HTTP API at `httpUrl` and its wire proxy on `proxyPort`
 * (loopback); `env` adds to the server's environment.
 */
export async function stdioMcpClient(
  pgtoll: { httpUrl: string; proxyPort: number },
  providerId: string,
  agentKey: string,
  env: Record<string, string> = {},
): Promise<Client> {
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [
      "--import",
      "tsx",
      "src/cli.ts",
      "mcp",
      "--provider",
      providerId,
      "--url",
      pgtoll.httpUrl,
      "--proxy",
      `postgres://127.0.0.1:${pgtoll.proxyPort}`,
    ],
    cwd: root,
    env: { PATH: process.env.PATH ?? "", PGTOLL_AGENT_KEY: agentKey, ...env },
    stderr: "pipe",
  });
  const client = new Client({ name: "pgtoll-test-host", version: "1" });
  await client.connect(transport);
  return client;
}

/**
 * A client of pgtoll's remote MCP endpoint with the SDK's own transport, authenticated by `token`; `address` is
 * sent as X-Forwarded-For (the client's address when pgtoll trusts its load balancer). `end` deletes the session.
 */
export async function remoteMcpClient(
  httpUrl: string,
  providerId: string,
  token: string,
  address?: string,
  timeoutMs?: number,
) {
  const transport = new StreamableHTTPClientTransport(new URL(`${httpUrl}/mcp?provider=${providerId}`), {
    requestInit: {
      headers: { Authorization: `Bearer ${token}`, ...(address ? { "X-Forwarded-For": address } : {}) },
    },
  });
  const client = new Client({ name: "pgtoll-test", version: "1" });
  await client.connect(transport, timeoutMs ? { timeout: timeoutMs } : undefined);
  return {
    client,
    async end() {
      await transport.terminateSession();
      await client.close();
    },
  };
}

/** Sessions on a provider's database (`adminUrl`) whose application_name is `application`. */
export async function upstreamSessionsOf(adminUrl: string, application: string): Promise<number> {
  const rows = await runSql<{ n: number }>(
    `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND application_name = '${application}'`,
    adminUrl,
  );
  return rows[0]?.n ?? 0;
}

/** `pgtoll mcp` without a provider (the catalog tools), from the sources, on pgtoll's HTTP API at `httpUrl`. */
export async function stdioCatalogClient(httpUrl: string): Promise<Client> {
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: ["--import", "tsx", "src/cli.ts", "mcp", "--url", httpUrl],
    cwd: root,
    env: { PATH: process.env.PATH ?? "" },
    stderr: "pipe",
  });
  const client = new Client({ name: "pgtoll-test-host", version: "1" });
  await client.connect(transport);
  return client;
}

/** A client of pgtoll's remote MCP endpoint without a provider or a token: the catalog tools. */
export async function remoteCatalogClient(httpUrl: string): Promise<Client> {
  const client = new Client({ name: "pgtoll-test", version: "1" });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${httpUrl}/mcp`)));
  return client;
}
