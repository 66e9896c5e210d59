import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { runSql } from "./database.js";

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
