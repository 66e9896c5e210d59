import { type Static, Type } from "@sinclair/typebox";
import { Amount, Timestamp, Uuid } from "./schemas.js";

/**
 * Shapes of the catalog (listing, public catalog, quote). The response schemas are also what is serialised: a
 * field not declared here never reaches an answer.
 */

const Price = Type.String({ description: "USDC, markup applied, exact (6 to 12 decimals)" });

const TableNotes = Type.Object(
  {
    description: Type.Optional(Type.String({ maxLength: 1000 })),
    columns: Type.Optional(
      Type.Record(Type.String({ maxLength: 200 }), Type.String({ maxLength: 500 }), {
        description: "a description per column, by column name",
      }),
    ),
  },
  { additionalProperties: false },
);

export const ListingBody = Type.Object(
  {
    listed: Type.Optional(Type.Boolean({ description: "shown in the public catalog; default false" })),
    name: Type.Optional(
      Type.String({ maxLength: 100, description: "default: the provider's registered name" }),
    ),
    description: Type.Optional(Type.String({ maxLength: 2000 })),
    tags: Type.Optional(
      Type.Array(Type.String({ maxLength: 32 }), {
        maxItems: 10,
        description: "lowercase letters, digits and -, e.g. aviation",
      }),
    ),
    tableDescriptions: Type.Optional(
      Type.Record(Type.String({ maxLength: 200 }), TableNotes, {
        description: 'by table name as SQL names it ("airports", "public.airports")',
      }),
    ),
    shownTables: Type.Optional(
      Type.Union([Type.Array(Type.String({ maxLength: 200 }), { maxItems: 200 }), Type.Null()], {
        description: "the tables the catalog shows; null or absent: every table the provider's role can read",
      }),
    ),
  },
  { additionalProperties: false },
);
export type ListingBody = Static<typeof ListingBody>;

const Column = Type.Object({ name: Type.String(), type: Type.String(), description: Type.String() });
const CatalogTableShape = Type.Object({
  schema: Type.String(),
  name: Type.String(),
  kind: Type.String({ description: "table, view, materialized view, partitioned table or foreign table" }),
  approximateRows: Type.Union([Type.Integer(), Type.Null()], {
    description: "the planner's estimate (pg_class.reltuples); null before the table was first analysed",
  }),
  description: Type.String(),
  columns: Type.Array(Column),
});

export const Listing = Type.Object({
  providerId: Uuid,
  listed: Type.Boolean(),
  name: Type.String(),
  description: Type.String(),
  tags: Type.Array(Type.String()),
  tableDescriptions: Type.Record(Type.String(), TableNotes),
  shownTables: Type.Union([Type.Array(Type.String()), Type.Null()]),
  refreshedAt: Type.Union([Timestamp, Type.Null()], {
    description: "when the tables were last read from the provider's database",
  }),
  refreshError: Type.Union([Type.String(), Type.Null()], {
    description: "why the last read failed; the tables shown are those of refreshedAt",
  }),
  tables: Type.Array(CatalogTableShape),
});

const Prices = Type.Object({
  pricePer1000Rows: Price,
  minimumCostPerStatement: Amount,
  pricePerMB: Price,
  pricePerSecond: Price,
  tablePricesPer1000Rows: Type.Record(Type.String(), Price),
});

const Terms = Type.Object({
  readOnly: Type.Boolean({ description: "agents' sessions are read-only" }),
  maxRowsWrittenPerStatement: Type.Integer({ description: "a statement writing more is rolled back" }),
  statementTimeoutMs: Type.Integer(),
  lockTimeoutMs: Type.Integer(),
  idleInTransactionTimeoutMs: Type.Integer(),
  maxRowsPerQuery: Type.Integer({ description: "largest result POST /api/query returns" }),
});

const CatalogHead = {
  id: Uuid,
  name: Type.String(),
  description: Type.String(),
  tags: Type.Array(Type.String()),
  prices: Prices,
  terms: Terms,
  refreshedAt: Type.Union([Timestamp, Type.Null()]),
};

export const CatalogEntry = Type.Object({
  ...CatalogHead,
  tables: Type.Object({
    count: Type.Integer(),
    names: Type.Array(Type.String(), { description: "the first 20, by name" }),
  }),
});

export const CatalogPage = Type.Object({
  providers: Type.Array(CatalogEntry),
  nextCursor: Type.Union([Type.String(), Type.Null()], { description: "pass as cursor for the next page" }),
});

export const CatalogProfile = Type.Object({ ...CatalogHead, tables: Type.Array(CatalogTableShape) });

export const CatalogQuery = Type.Object(
  {
    q: Type.Optional(
      Type.String({ maxLength: 200, description: "words in names, descriptions, tags, tables, columns" }),
    ),
    tag: Type.Optional(Type.String({ maxLength: 32 })),
    maxPricePer1000Rows: Type.Optional(
      Type.String({
        maxLength: 20,
        description: "USDC: only providers whose every row price (base and per table) is at most this",
      }),
    ),
    limit: Type.Optional(Type.String({ maxLength: 4, description: "1 to 100, default 20" })),
    cursor: Type.Optional(Type.String({ maxLength: 200 })),
  },
  { additionalProperties: false },
);
export type CatalogQuery = Static<typeof CatalogQuery>;

export const QuoteBody = Type.Object(
  {
    sql: Type.String({ minLength: 1, maxLength: 100_000 }),
    params: Type.Optional(
      Type.Array(Type.Union([Type.String(), Type.Number(), Type.Boolean(), Type.Null()]), {
        maxItems: 65535,
      }),
    ),
  },
  { additionalProperties: false },
);
export type QuoteBody = Static<typeof QuoteBody>;

export const Quote = Type.Object({
  allowed: Type.Boolean({ description: "whether the provider's policy lets the statement run" }),
  refusal: Type.Optional(
    Type.Object({ rule: Type.String({ description: "the guard's rule" }), message: Type.String() }),
  ),
  estimatedRows: Type.Optional(Type.Integer()),
  estimatedBytes: Type.Optional(Type.Integer({ description: "estimated rows x the plan's row width" })),
  estimatedCost: Type.Optional(Amount),
  costBreakdown: Type.Optional(
    Type.Object({ rowsCost: Amount, bytesCost: Amount, minimumApplied: Type.Boolean() }),
  ),
  pricePer1000Rows: Type.Optional(Price),
  price: Type.Optional(Type.String({ description: "every dimension of the provider's price" })),
});
