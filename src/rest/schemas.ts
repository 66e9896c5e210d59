import { type Static, Type } from "@sinclair/typebox";

/** Request/response shapes of the payment gateway (spec: payment-gateway.md), also the OpenAPI document. */
export const Uuid = Type.String({
  pattern: "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$",
  description: "UUID",
});
export const Address = Type.String({ description: "Ethereum address: 0x followed by 40 hex digits" });
export const Amount = Type.String({ description: "decimal token amount with 6 decimals, e.g. 1.500000" });
export const Timestamp = Type.String({ description: "ISO 8601 UTC timestamp" });

export const ErrorBody = Type.Object({ error: Type.String() });
/** An error of `POST /api/query`; `code` is the SQLSTATE when PostgreSQL raised it. */
export const QueryErrorBody = Type.Object({ error: Type.String(), code: Type.Optional(Type.String()) });
/**
 * A 402: `error` as every error, and when x402 is on the PaymentRequired object's fields too (the same as the
 * PAYMENT-REQUIRED header).
 */
export const PaymentRequiredBody = Type.Object({
  error: Type.String(),
  code: Type.Optional(Type.String()),
  x402Version: Type.Optional(Type.Integer()),
  resource: Type.Optional(Type.Object({}, { additionalProperties: true })),
  accepts: Type.Optional(Type.Array(Type.Object({}, { additionalProperties: true }))),
  extensions: Type.Optional(
    Type.Object(
      {},
      { additionalProperties: true, description: "x402 extensions: bazaar for listed providers" },
    ),
  ),
});
export const RateLimitedBody = Type.Object({ error: Type.String(), retryAfter: Type.Integer() });

export const Provider = Type.Object({
  id: Uuid,
  name: Type.String(),
  email: Type.String(),
  walletAddress: Address,
  provisionedByGateway: Type.Boolean(),
  createdAt: Timestamp,
});

export const RegisterBody = Type.Object({
  name: Type.String({ minLength: 1, maxLength: 200 }),
  email: Type.String({ minLength: 3, maxLength: 320 }),
  walletAddress: Type.String({ maxLength: 42 }),
  connectionString: Type.String({ minLength: 1, maxLength: 4096 }),
});
export type RegisterBody = Static<typeof RegisterBody>;

export const Pricing = Type.Object({
  id: Uuid,
  providerId: Uuid,
  basePricePer1000Rows: Type.Number(),
  markupMultiplier: Type.Number(),
  readOnly: Type.Boolean({ description: "agents' sessions are read-only (an extension of the spec)" }),
  maxRowsWrittenPerStatement: Type.Integer({
    description: "a statement writing more rows is rolled back (an extension of the spec)",
  }),
  lockTimeoutMs: Type.Integer({
    description: "lock_timeout of agents' statements, ms (an extension of the spec)",
  }),
  idleInTransactionTimeoutMs: Type.Integer({
    description:
      "an agent idle this long inside a transaction is disconnected, ms (an extension of the spec)",
  }),
  minimumCostPerStatement: Type.Number({
    description: "USDC every statement that runs costs at least; 0: none (an extension of the spec)",
  }),
  pricePerMB: Type.Number({
    description: "USDC per 1 000 000 bytes of result data sent to the agent (an extension of the spec)",
  }),
  pricePerSecond: Type.Number({
    description: "USDC per second of statement time, charged per millisecond (an extension of the spec)",
  }),
  tablePrices: Type.Record(Type.String(), Type.Number(), {
    description:
      "basePricePer1000Rows per table: a statement's rows cost the highest price among the tables it reads (an extension of the spec)",
  }),
  allowRowFolding: Type.Boolean({
    description:
      "statements that read a priced table may fold many rows into one (string_agg, array_agg, scalar subqueries; an extension of the spec)",
  }),
  createdAt: Timestamp,
  updatedAt: Timestamp,
});

export const PricingBody = Type.Object({
  basePricePer1000Rows: Type.Number({
    description: "token units per 1000 rows, 0 to 1000000, at most 6 decimals",
  }),
  markupMultiplier: Type.Number({ description: "1 to 100, at most 6 decimals; 1.0 means no markup" }),
  readOnly: Type.Optional(
    Type.Boolean({
      description:
        "true: agents' sessions run with default_transaction_read_only=on, so PostgreSQL refuses every write. Omitted: unchanged (false at first).",
    }),
  ),
  maxRowsWrittenPerStatement: Type.Optional(
    Type.Integer({
      description:
        "1 to 10000000: a statement of an agent that writes more rows is rolled back and not charged. Omitted: unchanged (1000 at first).",
    }),
  ),
  lockTimeoutMs: Type.Optional(
    Type.Integer({
      description:
        "1 to 600000: PostgreSQL's lock_timeout for agents' statements, so that none waits long on the provider's locks. Omitted: unchanged (5000 at first).",
    }),
  ),
  idleInTransactionTimeoutMs: Type.Optional(
    Type.Integer({
      description:
        "1000 to 3600000: PostgreSQL's idle_in_transaction_session_timeout for agents' wire sessions, so that no idle agent holds locks. Omitted: unchanged (30000 at first).",
    }),
  ),
  minimumCostPerStatement: Type.Optional(
    Type.Number({
      description:
        "0 to 1000 USDC, at most 6 decimals: every statement that runs costs at least this. Omitted: unchanged (0 at first).",
    }),
  ),
  pricePerMB: Type.Optional(
    Type.Number({
      description:
        "0 to 1000000 USDC per 1 000 000 bytes of result data (DataRow payloads) sent to the agent. Omitted: unchanged (0 at first).",
    }),
  ),
  pricePerSecond: Type.Optional(
    Type.Number({
      description:
        "0 to 1000000 USDC per second of statement time on the provider's database, charged per millisecond. Omitted: unchanged (0 at first).",
    }),
  ),
  tablePrices: Type.Optional(
    Type.Record(Type.String(), Type.Number(), {
      description:
        'Up to 1000 tables, {"table": n, "schema.table": n} with n a basePricePer1000Rows: a statement that reads a priced table has its rows charged at the highest base price among the tables it reads. Omitted: unchanged ({} at first; send {} to remove every table price).',
    }),
  ),
  allowRowFolding: Type.Optional(
    Type.Boolean({
      description:
        "true: statements that read a priced table may fold many rows into one value or row (string_agg, array_agg, json_agg, ARRAY(subquery), scalar subqueries in the select list, WITH RECURSIVE), each such row charged as one; price them with pricePerMB. false: such statements are refused (rule priced-table-folding). Omitted: unchanged (false at first).",
    }),
  ),
});
export type PricingBody = Static<typeof PricingBody>;

export const Balance = Type.Object({
  agentWallet: Address,
  providerId: Uuid,
  balance: Amount,
  available: Type.String({ description: "balance minus funds held by statements still running" }),
  updatedAt: Type.Union([Timestamp, Type.Null()]),
});

export const DailyLimitBody = Type.Object({
  dailyLimit: Type.String({
    maxLength: 32,
    description: 'USDC the provider may charge the agent per UTC day, at most 6 decimals, e.g. "5" or "0.25"',
  }),
});
export type DailyLimitBody = Static<typeof DailyLimitBody>;

export const DailyLimit = Type.Object({
  agentWallet: Type.String(),
  providerId: Uuid,
  dailyLimit: Type.Union([Amount, Type.Null()], { description: "null: no limit is set" }),
  spentToday: Amount,
  remainingToday: Type.Union([Amount, Type.Null()], {
    description: "dailyLimit minus spentToday, at least 0",
  }),
  resetsAt: Type.String({ description: "the next UTC midnight, when spentToday starts again from 0" }),
});

export const DepositBody = Type.Object({
  txHash: Type.String({ maxLength: 66 }),
  agentWallet: Type.String({ maxLength: 42 }),
  providerId: Type.String({ maxLength: 36 }),
});
export type DepositBody = Static<typeof DepositBody>;

export const TopUpBody = Type.Object({
  agentWallet: Type.String({ maxLength: 42 }),
  providerId: Type.String({ maxLength: 36 }),
  amount: Type.Union([Type.String({ maxLength: 40 }), Type.Number()], {
    description:
      'USDC to credit, e.g. "5" or 0.25 (at most 6 decimals), within PGTOLL_X402_MIN_TOPUP..PGTOLL_X402_MAX_TOPUP',
  }),
});
export type TopUpBody = Static<typeof TopUpBody>;

export const DepositResult = Type.Object({
  success: Type.Literal(true),
  balance: Amount,
  transaction: Type.Object({ txHash: Type.String(), amount: Amount, verified: Type.Boolean() }),
});

export const QueryBody = Type.Object({
  sql: Type.String({ maxLength: 1_000_000 }),
  agentWallet: Type.String({ maxLength: 42 }),
  providerId: Type.String({ maxLength: 36 }),
  params: Type.Optional(
    Type.Array(Type.Union([Type.String(), Type.Number(), Type.Boolean(), Type.Null()]), {
      maxItems: 65535,
      description: "values for $1, $2, ... (single statement only)",
    }),
  ),
  maxCost: Type.Optional(
    Type.Union([Type.String({ maxLength: 32 }), Type.Number()], {
      description:
        "USDC this request may cost at most: an estimate above it is refused (422 budget_exceeded) before anything runs, and a result that would cost more is cut to the rows it pays for (truncated: true). An extension of the spec.",
    }),
  ),
});
export type QueryBody = Static<typeof QueryBody>;

export const QueryResult = Type.Object({
  rows: Type.Array(Type.Object({}, { additionalProperties: true })),
  rowCount: Type.Integer(),
  estimatedCost: Amount,
  actualCost: Amount,
  executionTime: Type.String({ description: "milliseconds with unit suffix, e.g. 4.21ms" }),
  truncated: Type.Optional(
    Type.Boolean({
      description:
        "true when the rows stop short of the result (the agent's balance, maxCost, its daily limit or a result cap); present with maxCost, or when true",
    }),
  ),
  stoppedBy: Type.Optional(
    Type.Object(
      {
        code: Type.String({
          description: "PT402 (balance), budget_exceeded (maxCost, daily limit), result_too_large (a cap)",
        }),
        message: Type.String(),
      },
      {
        description:
          "Why a truncated result stops: the rows before it were delivered and charged. An extension of the spec.",
      },
    ),
  ),
  costBreakdown: Type.Optional(
    Type.Object(
      {
        rows: Type.Integer(),
        bytes: Type.Integer({ description: "result bytes sent (DataRow payloads)" }),
        milliseconds: Type.Integer({ description: "statement time on the provider's database" }),
        rowsCost: Amount,
        bytesCost: Amount,
        timeCost: Amount,
        minimumApplied: Type.Boolean({ description: "the provider's minimum per statement was charged" }),
      },
      {
        description:
          "actualCost's parts (each rounded up; the total is rounded once), when the provider prices more than rows. An extension of the spec.",
      },
    ),
  ),
});

export const LedgerEntry = Type.Object({
  id: Type.String(),
  providerId: Uuid,
  type: Type.Union([Type.Literal("deposit"), Type.Literal("query")]),
  amount: Type.String(),
  balanceBefore: Amount,
  balanceAfter: Amount,
  txHash: Type.Union([Type.String(), Type.Null()]),
  metadata: Type.Object({}, { additionalProperties: true }),
  timestamp: Timestamp,
});

export const TransactionsQuery = Type.Object({
  providerId: Type.Optional(Type.String({ maxLength: 36 })),
  limit: Type.Optional(
    Type.String({
      pattern: "^[0-9]{1,9}$",
      description: "integer >= 1; default 50; values above 100 are capped at 100",
    }),
  ),
});
export type TransactionsQuery = Static<typeof TransactionsQuery>;

export const Health = Type.Object({
  status: Type.Union([Type.Literal("healthy"), Type.Literal("unhealthy")]),
  timestamp: Timestamp,
  error: Type.Optional(Type.String()),
});
