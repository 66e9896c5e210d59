import type { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { z } from "zod";
import { formatPrice, formatPricePer1000Rows, isRowsOnly } from "../billing/cost.js";
import { formatMicro, parseMicro } from "../billing/money.js";
import { queryWithinBudget } from "./budgeted-query.js";
import { describeTable, listTables } from "./schema-catalog.js";
import { type AgentBackend, commandOf, estimateStatement, queryFailure } from "./tool-runs.js";

/** Rows a `query` call returns when it does not say. */
export const DEFAULT_MAX_ROWS = 100;
/** The most rows one `query` call may ask for: a tool result goes into a model's context. */
export const MAX_ROWS_LIMIT = 10_000;

const Usdc = z.string().describe("an amount of USDC, as a decimal string with 6 decimals");
/** A price is exact: a markup can take it below the micro-USDC. */
const UsdcPrice = z
  .string()
  .describe("USDC per 1000 rows with the provider's markup, as a decimal string with 6 to 12 decimals");
const Row = z.record(z.string(), z.unknown());
const CostParts = z
  .record(z.string(), z.unknown())
  .describe("the cost's parts (rows, bytes, milliseconds and the cost of each, minimumApplied)");
const SqlParam = z.union([z.string(), z.number(), z.boolean(), z.null()]);

/** A result for a model to read (text) and for a host to use (structured), the same content in both. */
function answer<T extends Record<string, unknown>>(structured: T): CallToolResult {
  return { content: [{ type: "text", text: JSON.stringify(structured) }], structuredContent: structured };
}

function toolError(message: string): CallToolResult {
  return { isError: true, content: [{ type: "text", text: message }] };
}

/** Runs a tool body; an error becomes a tool error with its message (what the model reads), never a crash. */
async function guarded(body: () => Promise<CallToolResult>): Promise<CallToolResult> {
  try {
    return await body();
  } catch (error) {
    return toolError(error instanceof Error ? error.message : String(error));
  }
}

/**
 * The pgtoll tools and the schema resource, on any MCP server (stdio or Streamable HTTP). Every statement
 * goes through the agent's wire-proxy session, so it is guarded and charged by the same rules as psql.
 */
export function registerPgtollTools(server: McpServer, backend: AgentBackend): void {
  const { session, providerId } = backend;

  server.registerTool(
    "query",
    {
      title: "Run SQL",
      description:
        "Run one SQL statement on the provider's PostgreSQL database and get its rows as JSON. Every row " +
        "returned is charged from your prepaid USDC balance at the provider's price (see `estimate` first for " +
        "large reads). At most max_rows rows are returned (default 100) and only those are charged; " +
        "`truncated: true` means the statement had more. Use $1, $2 ... placeholders with `params` for values. " +
        "With `max_cost` (USDC) the whole call costs at most that: the statement is estimated first (the estimate " +
        "is charged as a statement, within max_cost), not run when the estimate is above what is left, and " +
        "otherwise stopped at the rows the rest pays for, every row charged returned. " +
        "Statements the provider's policy refuses (DROP, ALTER, COPY ...) fail with the rule's name.",
      inputSchema: {
        sql: z.string().min(1).max(100_000).describe("one SQL statement"),
        params: z.array(SqlParam).max(1000).optional().describe("values for $1, $2 ... in order"),
        max_rows: z
          .number()
          .int()
          .min(1)
          .max(MAX_ROWS_LIMIT)
          .optional()
          .describe(`most rows to return (default ${DEFAULT_MAX_ROWS})`),
        max_cost: z
          .string()
          .regex(/^\d{1,9}(\.\d{1,6})?$/)
          .optional()
          .describe('most USDC this statement may cost, e.g. "0.05"'),
      },
      outputSchema: {
        rows: z.array(Row),
        rowCount: z.number().describe("rows returned, or rows changed by a write"),
        truncated: z.boolean().describe("the statement had more rows than max_rows"),
        command: z.string().describe('the command that ran, as PostgreSQL tags it: "SELECT", "INSERT" ...'),
        cost: Usdc.describe("USDC charged for this call, the estimate max_cost runs first included"),
        balance: Usdc.describe("your balance with the provider after this call"),
        note: z.string().optional().describe("present when the result was cut at max_rows or max_cost"),
        estimateCost: Usdc.optional().describe("with max_cost: what the estimate run first cost, in `cost`"),
        costBreakdown: CostParts.optional().describe(
          "the statement's cost parts, when the provider prices more than rows",
        ),
      },
      annotations: { title: "Run SQL", readOnlyHint: false, destructiveHint: true, openWorldHint: false },
    },
    ({ sql, params, max_rows, max_cost }) =>
      guarded(async () => {
        const maxRows = max_rows ?? DEFAULT_MAX_ROWS;
        const budget = max_cost === undefined ? undefined : parseMicro(max_cost)!;
        try {
          const run =
            budget === undefined
              ? { ...(await session.statement(sql, params ?? [], maxRows)), estimateMicro: undefined }
              : await queryWithinBudget(session, sql, params ?? [], maxRows, budget);
          if ("refusal" in run) return toolError(run.refusal);
          const { result, costMicro, balanceMicro, estimateMicro } = run;
          const note = result.budgetReached
            ? `stopped at max_cost (${formatMicro(budget!)} USDC); ${(await session.price()).picoUsdcPerSecond ? "only the rows returned and the statement's time up to max_cost were charged" : "only the rows returned were charged"}`
            : result.truncated
              ? `stopped at max_rows (${maxRows}); only the rows returned were charged`
              : undefined;
          return answer({
            rows: result.rows,
            rowCount: result.rowCount,
            truncated: result.truncated,
            command: result.command || (await commandOf(sql)),
            cost: formatMicro(costMicro),
            balance: formatMicro(balanceMicro),
            ...(note ? { note } : {}),
            ...(estimateMicro === undefined ? {} : { estimateCost: formatMicro(estimateMicro) }),
            ...(isRowsOnly(await session.price())
              ? {}
              : { costBreakdown: await session.lastStatementCost() }),
          });
        } catch (error) {
          return toolError(await queryFailure(backend, error, maxRows));
        }
      }),
  );

  server.registerTool(
    "estimate",
    {
      title: "Estimate a statement's cost",
      description:
        "Ask PostgreSQL's planner how many rows (and bytes) a statement would return and what that would cost, " +
        "without running it (EXPLAIN); time is not estimated. The estimate itself is charged as a statement.",
      inputSchema: { sql: z.string().min(1).max(100_000).describe("one SQL statement") },
      outputSchema: {
        estimatedRows: z.number(),
        estimatedBytes: z.number().describe("estimated rows x the plan's row width"),
        estimatedCost: Usdc.describe("cost of the estimated rows and bytes at the provider's price"),
        costBreakdown: CostParts,
        pricePer1000Rows: UsdcPrice,
        price: z.string().describe("every dimension of the provider's price (SHOW pgtoll.price)"),
        cost: Usdc.describe("USDC charged for this estimate"),
      },
      annotations: { title: "Estimate cost", readOnlyHint: true, openWorldHint: false },
    },
    ({ sql }) => guarded(async () => answer((await estimateStatement(session, sql)).view)),
  );

  server.registerTool(
    "list_tables",
    {
      title: "List tables",
      description:
        "The tables and views you may read on the provider's database, with their columns and types, comments " +
        "and the planner's row estimates. Charged like a query: one row per table.",
      inputSchema: {},
      outputSchema: { tables: z.array(Row), truncated: z.boolean(), cost: Usdc },
      annotations: { title: "List tables", readOnlyHint: true, openWorldHint: false },
    },
    () =>
      guarded(async () => {
        const { tables, truncated, costMicro } = await listTables(session);
        return answer({ tables, truncated, cost: formatMicro(costMicro) });
      }),
  );

  server.registerTool(
    "describe_table",
    {
      title: "Describe a table",
      description:
        "One table or view in detail: columns (type, nullable, default, comment), primary, foreign and unique " +
        "keys, indexes, comment and row estimate. Name it as SQL would (`orders`, `sales.orders`). Charged as " +
        "one row.",
      inputSchema: {
        table: z.string().min(1).max(300).describe("the table's name, schema-qualified if need be"),
      },
      outputSchema: { table: Row, cost: Usdc },
      annotations: { title: "Describe a table", readOnlyHint: true, openWorldHint: false },
    },
    ({ table }) =>
      guarded(async () => {
        const described = await describeTable(session, table);
        if (!described.table)
          return toolError(
            `no table or view "${table}" that you may read; list_tables shows the ones there are`,
          );
        return answer({ table: described.table, cost: formatMicro(described.costMicro) });
      }),
  );

  server.registerTool(
    "balance",
    {
      title: "Balance",
      description:
        "Your prepaid USDC balance with this provider, this session's charges included, the price, your daily " +
        "limit with this provider and where to deposit. Free, and it does not need the provider's database.",
      inputSchema: {},
      outputSchema: {
        balance: Usdc,
        pricePer1000Rows: UsdcPrice,
        price: z.string().describe("every dimension of the provider's price"),
        dailyLimit: Usdc.nullable().describe(
          "null: no daily limit set (PUT /api/agents/:wallet/limits/:providerId)",
        ),
        spentToday: Usdc,
        remainingToday: Usdc.nullable(),
        resetsAt: z.string(),
        depositAddress: z.string(),
      },
      annotations: { title: "Balance", readOnlyHint: true, openWorldHint: false },
    },
    () =>
      guarded(async () => {
        const { balanceMicro, price, depositAddress } = await backend.account();
        return answer({
          balance: formatMicro(balanceMicro),
          pricePer1000Rows: formatPricePer1000Rows(price),
          price: formatPrice(price),
          ...(await backend.dailyLimit()),
          depositAddress,
        });
      }),
  );

  server.registerTool(
    "transactions",
    {
      title: "Transactions",
      description:
        "Your ledger entries with this provider, newest first: deposits and the charges for your statements " +
        "(each with the statements it covers). Free.",
      inputSchema: {
        limit: z.number().int().min(1).max(100).optional().describe("entries to return (default 20)"),
      },
      outputSchema: { transactions: z.array(Row) },
      annotations: { title: "Transactions", readOnlyHint: true, openWorldHint: false },
    },
    ({ limit }) => guarded(async () => answer({ transactions: await backend.transactions(limit ?? 20) })),
  );

  const deposit = backend.deposit;
  if (deposit) {
    server.registerTool(
      "deposit",
      {
        title: "Deposit USDC",
        description:
          "Send `amount` USDC from your wallet to the provider's wallet on chain, wait for its confirmations and " +
          `credit it to your balance. Moves real funds; at most ${formatMicro(deposit.maxMicro)} USDC per call.`,
        inputSchema: {
          amount: z
            .string()
            .regex(/^\d{1,9}(\.\d{1,6})?$/)
            .describe('USDC to send, e.g. "5" or "0.25"'),
        },
        outputSchema: { txHash: z.string(), amount: Usdc, balance: Usdc },
        annotations: {
          title: "Deposit USDC",
          readOnlyHint: false,
          destructiveHint: false,
          openWorldHint: true,
        },
      },
      ({ amount }) => guarded(async () => answer(await deposit.send(amount))),
    );
  }

  server.registerResource(
    "schema",
    `pgtoll://${providerId}/schema`,
    {
      title: "Database schema",
      description:
        "The tables and views you may read on the provider's database, with columns and types (as list_tables; " +
        "reading it is charged the same: one row per table).",
      mimeType: "application/json",
    },
    async (uri) => {
      const { tables, truncated } = await listTables(session);
      return {
        contents: [
          {
            uri: uri.href,
            mimeType: "application/json",
            text: JSON.stringify({ providerId, tables, truncated }),
          },
        ],
      };
    },
  );
}
