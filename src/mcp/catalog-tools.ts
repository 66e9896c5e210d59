import type { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { z } from "zod";

/** The catalog as the MCP tools read it: pgtoll's database (remote) or its HTTP API (stdio), the same answers. */
export interface CatalogBackend {
  /** `GET /api/providers` with these parameters. */
  search(params: {
    q?: string;
    tag?: string;
    maxPricePer1000Rows?: string;
    limit?: number;
    cursor?: string;
  }): Promise<Record<string, unknown>>;
  /** `GET /api/providers/:id`; null when the provider is not in the catalog. */
  describe(providerId: string): Promise<Record<string, unknown> | null>;
}

const Row = z.record(z.string(), z.unknown());

function answer<T extends Record<string, unknown>>(structured: T): CallToolResult {
  return { content: [{ type: "text", text: JSON.stringify(structured) }], structuredContent: structured };
}

function toolError(message: string): CallToolResult {
  return { isError: true, content: [{ type: "text", text: message }] };
}

/**
 * The catalog tools: finding providers and reading a provider's profile. Free: they need no agent token and no
 * funds, and never reach a provider's database (the catalog is pgtoll's own copy of what providers list).
 */
export function registerCatalogTools(server: McpServer, catalog: CatalogBackend): void {
  server.registerTool(
    "search_providers",
    {
      title: "Search data providers",
      description:
        "Find PostgreSQL data providers you can query and pay per row, in pgtoll's catalog. Free (costs nothing, " +
        "needs no token or funds). Returns for each listed provider: id, name, description, tags, every price " +
        "(USDC per 1000 rows, minimum per statement, per MB, per second, per table), terms (read-only, rows a " +
        "statement may write, timeouts) and its tables' names; `nextCursor` for the next page. Search words " +
        "match table and column names first, then names and tags, then descriptions.",
      inputSchema: {
        query: z.string().max(200).optional().describe("words to search for, e.g. 'airports routes'"),
        tag: z.string().max(32).optional().describe("only providers with this tag"),
        max_price_per_1000_rows: z
          .string()
          .regex(/^\d{1,9}(\.\d{1,6})?$/)
          .optional()
          .describe('only providers whose every row price is at most this many USDC, e.g. "0.05"'),
        limit: z.number().int().min(1).max(100).optional().describe("providers per page (default 20)"),
        cursor: z.string().max(200).optional().describe("nextCursor of the previous page"),
      },
      outputSchema: { providers: z.array(Row), nextCursor: z.string().nullable() },
      annotations: { title: "Search providers", readOnlyHint: true, openWorldHint: false },
    },
    async ({ query, tag, max_price_per_1000_rows, limit, cursor }) => {
      try {
        return answer(
          await catalog.search({
            q: query,
            tag,
            maxPricePer1000Rows: max_price_per_1000_rows,
            limit,
            cursor,
          }),
        );
      } catch (error) {
        return toolError(error instanceof Error ? error.message : String(error));
      }
    },
  );

  server.registerTool(
    "describe_provider",
    {
      title: "Describe a data provider",
      description:
        "A listed provider's profile from pgtoll's catalog. Free (costs nothing, needs no token or funds). " +
        "Returns its name, description, tags, every price and its terms, and each table it shows: kind, the " +
        "planner's approximate row count, description, and columns with their types and descriptions. To query " +
        "it, connect with ?provider=<id> and an agent token.",
      inputSchema: { provider_id: z.string().uuid().describe("the provider's id, from search_providers") },
      outputSchema: { provider: Row },
      annotations: { title: "Describe provider", readOnlyHint: true, openWorldHint: false },
    },
    async ({ provider_id }) => {
      try {
        const profile = await catalog.describe(provider_id.toLowerCase());
        if (!profile)
          return toolError(
            `provider ${provider_id} is not in the catalog; search_providers lists those that are`,
          );
        return answer({ provider: profile });
      } catch (error) {
        return toolError(error instanceof Error ? error.message : String(error));
      }
    },
  );
}
