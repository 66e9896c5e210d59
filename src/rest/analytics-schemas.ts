import { type TSchema, Type } from "@sinclair/typebox";
import { Address, Amount, Timestamp, Uuid } from "./schemas.js";

/** Request and response shapes of the provider analytics (GET /api/providers/:id/…), also in the OpenAPI document. */
export const ProviderParams = Type.Object({ id: Type.String() });
export const ProviderKeyHeaders = Type.Object({ "x-api-key": Type.Optional(Type.String()) });

const From = Type.Optional(
  Type.String({
    description: "start of the range, inclusive: ISO 8601 date or time with a zone; default to - 7 days",
  }),
);
const To = Type.Optional(Type.String({ description: "end of the range, exclusive; default now" }));
export const RangeQuery = Type.Object({ from: From, to: To });
export const EarningsQuery = Type.Object({
  from: From,
  to: To,
  granularity: Type.Optional(
    Type.String({ description: "hour or day (UTC buckets); default hour up to 2 days" }),
  ),
});
export const AgentsQuery = Type.Object({
  from: From,
  to: To,
  limit: Type.Optional(Type.String({ description: "1 to 100, default 20" })),
  cursor: Type.Optional(Type.String({ description: "nextCursor of the previous page" })),
});
export const StatementsQuery = Type.Object({
  from: From,
  to: To,
  limit: Type.Optional(Type.String({ description: "1 to 100, default 10" })),
});

const RangeFields = { providerId: Uuid, from: Timestamp, to: Timestamp };

/** A figure of the summary: this period, the one before it, and the relative change (null from nothing). */
function compared(value: TSchema) {
  return Type.Object({
    current: value,
    previous: value,
    change: Type.Union([Type.Number(), Type.Null()], {
      description: "(current - previous) / previous, e.g. 0.25 for 25 % more; null when previous is 0",
    }),
  });
}

export const SummaryAnswer = Type.Object({
  ...RangeFields,
  previousFrom: Timestamp,
  previousTo: Timestamp,
  revenue: compared(Amount),
  statements: compared(Type.Integer()),
  rows: compared(Type.Integer()),
  activeAgents: compared(Type.Integer()),
  averageCostPerStatement: compared(Amount),
});

export const EarningsAnswer = Type.Object({
  ...RangeFields,
  granularity: Type.Union([Type.Literal("hour"), Type.Literal("day")]),
  buckets: Type.Array(
    Type.Object({
      start: Timestamp,
      revenue: Amount,
      statements: Type.Integer(),
      rows: Type.Integer(),
      agents: Type.Integer(),
    }),
  ),
});

export const AgentsAnswer = Type.Object({
  ...RangeFields,
  agents: Type.Array(
    Type.Object({
      wallet: Address,
      spent: Amount,
      statements: Type.Integer(),
      rows: Type.Integer(),
      balance: Amount,
      lastActive: Type.Union([Timestamp, Type.Null()]),
    }),
  ),
  nextCursor: Type.Union([Type.String(), Type.Null()]),
});

const ShapeFigures = { calls: Type.Integer(), rows: Type.Integer(), revenue: Amount };
export const StatementsAnswer = Type.Object({
  ...RangeFields,
  statements: Type.Array(
    Type.Object({
      fingerprint: Type.String(),
      normalized: Type.String({ description: "the sample with its constants replaced by $1, $2, …" }),
      sample: Type.String(),
      ...ShapeFigures,
    }),
  ),
  otherShapes: Type.Object(ShapeFigures, {
    description: "shapes beyond the 20 a charge window lists, summed",
  }),
});

export const RefusalsAnswer = Type.Object({
  ...RangeFields,
  total: Type.Integer(),
  byRule: Type.Array(Type.Object({ rule: Type.String(), refusals: Type.Integer() })),
  byFunds: Type.Array(Type.Object({ reason: Type.String(), refusals: Type.Integer() })),
});

/** GET /api/providers/:id/account: who the key belongs to, as registered (never the connection string). */
export const ProviderAccountAnswer = Type.Object({
  providerId: Uuid,
  name: Type.String(),
  email: Type.String(),
  walletAddress: Type.String(),
  createdAt: Timestamp,
});

export const DatabaseCheckAnswer = Type.Object({
  providerId: Uuid,
  reachable: Type.Boolean(),
  latencyMs: Type.Union([Type.Number(), Type.Null()]),
  error: Type.Union([Type.String(), Type.Null()]),
  checkedAt: Timestamp,
});
