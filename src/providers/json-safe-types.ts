import pg from "pg";

const { builtins } = pg.types;
const identity = (value: string) => value;
const textArray = pg.types.getTypeParser(1009 as Parameters<typeof pg.types.getTypeParser>[0] /* text[] */);

function finiteOrText(value: string): number | string {
  const n = Number.parseFloat(value);
  return Number.isFinite(n) ? n : value;
}

/**
 * How provider results become JSON (documented in docs/payment-gateway.md): int8 and numeric stay decimal strings (no
 * precision lost), float4/float8 are numbers except NaN/Infinity (strings), bytea is PostgreSQL's hex text
 * (`\x0102`), date/time/interval types are PostgreSQL's ISO text, json/jsonb are parsed, arrays follow their
 * element type. Anything else is PostgreSQL's text form.
 */
const overrides = new Map<number, (value: string) => unknown>([
  [builtins.INT8, identity],
  [builtins.NUMERIC, identity],
  [builtins.MONEY, identity],
  [builtins.FLOAT4, finiteOrText],
  [builtins.FLOAT8, finiteOrText],
  [builtins.BYTEA, identity],
  [builtins.DATE, identity],
  [builtins.TIME, identity],
  [builtins.TIMETZ, identity],
  [builtins.TIMESTAMP, identity],
  [builtins.TIMESTAMPTZ, identity],
  [builtins.INTERVAL, identity],
  // arrays of the above: element text, unparsed
  [1001, textArray], // bytea[]
  [1182, textArray], // date[]
  [1183, textArray], // time[]
  [1270, textArray], // timetz[]
  [1115, textArray], // timestamp[]
  [1185, textArray], // timestamptz[]
  [1187, textArray], // interval[]
  [1231, textArray], // numeric[]
  [1016, textArray], // int8[]
  [1021, textArray], // float4[] (keeps NaN/Infinity representable)
  [1022, textArray], // float8[]
]);

export const jsonSafeTypes = {
  getTypeParser(oid: number, format?: "text" | "binary") {
    if (format === "binary") return pg.types.getTypeParser(oid, format);
    return overrides.get(oid) ?? pg.types.getTypeParser(oid, "text");
  },
};
