import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import type { FastifyReply, FastifyRequest } from "fastify";
import { parseMicro } from "../billing/money.js";
import { CatalogCursorError, catalogProfile, searchCatalog } from "../catalog/catalog-read.js";
import type { GatewayContext } from "../rest/context.js";
import { type CatalogBackend, registerCatalogTools } from "./catalog-tools.js";

/** The catalog read from pgtoll's own database, as `GET /api/providers` and `GET /api/providers/:id` answer. */
export function databaseCatalog(ctx: Pick<GatewayContext, "db" | "config">): CatalogBackend {
  const terms = { statementTimeoutMs: ctx.config.statementTimeoutMs, rowCap: ctx.config.rowCap };
  return {
    async search({ q, tag, maxPricePer1000Rows, limit, cursor }) {
      try {
        return await searchCatalog(
          ctx.db,
          {
            q,
            tag,
            maxMicroPer1000Rows:
              maxPricePer1000Rows === undefined ? undefined : (parseMicro(maxPricePer1000Rows) ?? 0n),
            limit: limit ?? 20,
            cursor,
          },
          terms,
        );
      } catch (error) {
        if (error instanceof CatalogCursorError) throw new Error(error.message);
        throw error;
      }
    },
    describe: (providerId) => catalogProfile(ctx.db, providerId, terms),
  };
}

/**
 * `/mcp` without a provider: the catalog tools over Streamable HTTP, stateless (a server per request, no
 * session to hold), with no token, limited per client address to `perMinute` requests.
 */
export function catalogMcpHandler(ctx: GatewayContext, perMinute: number) {
  const catalog = databaseCatalog(ctx);
  return async function handle(request: FastifyRequest, reply: FastifyReply) {
    if (request.method !== "POST")
      return reply
        .code(405)
        .header("Allow", "POST")
        .send({
          jsonrpc: "2.0",
          error: { code: -32000, message: "the catalog's MCP endpoint is stateless: POST only" },
          id: null,
        });
    if (ctx.config.rateLimit) {
      const hit = await ctx.rateLimitStore.hit(`mcp-catalog:${request.ip}`, 60_000).catch(() => null);
      if (hit && hit.count > perMinute) {
        const retryAfter = Math.max(1, Math.ceil((hit.resetAtMs - Date.now()) / 1000));
        return reply
          .code(429)
          .header("Retry-After", retryAfter)
          .send({
            error: `too many MCP requests from this address: at most ${perMinute} a minute`,
            retryAfter,
          });
      }
    }
    const server = new McpServer({ name: "pgtoll-catalog", version: "1" });
    registerCatalogTools(server, catalog);
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
    await server.connect(transport);
    reply.hijack();
    reply.raw.on("close", () => {
      void transport.close().catch(() => {});
      void server.close().catch(() => {});
    });
    await transport.handleRequest(request.raw, reply.raw, request.body);
  };
}
