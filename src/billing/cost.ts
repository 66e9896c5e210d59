/**
 * A provider's pricing as it sets it: micro-USDC per 1000 rows and the markup in millionths (the spec's two
 * numbers), and the optional dimensions beyond rows, each absent or 0 when not used.
 */
export interface PriceSettings {
  priceMicroPer1000Rows: bigint;
  markupPpm: bigint;
  /** Micro-USDC every statement that runs costs at least (the markup does not apply to it). */
  minimumMicroPerStatement?: bigint;
  /** Micro-USDC per 10^6 bytes of result data sent to the agent. */
  priceMicroPerMB?: bigint;
  /** Micro-USDC per second of statement time on the provider's database, charged per millisecond. */
  priceMicroPerSecond?: bigint;
  /** Micro-USDC per 1000 rows of statements that read a table, by `table` or `schema.table`. */
  tablePricesMicroPer1000Rows?: ReadonlyMap<string, bigint>;
}

/**
 * What the cost rule charges: USDC per 1000 rows with the markup applied, in pico-USDC (10^-12 USDC). A base
 * price in micro-USDC times a markup in millionths is a whole number of pico-USDC, so every price a provider can
 * set is exact in this unit, and so is every price `SHOW pgtoll.price` prints.
 */
export interface Price {
  picoUsdcPer1000Rows: bigint;
  /** Micro-USDC: no statement that runs costs less. */
  minimumMicro?: bigint;
  /** Pico-USDC per 10^6 result bytes, markup applied. */
  picoUsdcPerMB?: bigint;
  /** Pico-USDC per second of statement time, markup applied. */
  picoUsdcPerSecond?: bigint;
  /** Pico-USDC per 1000 rows of a statement that reads the table (key `table` or `schema.table`), markup applied. */
  tablePicoUsdcPer1000Rows?: ReadonlyMap<string, bigint>;
}

const PICO_PER_MICRO = 1_000_000n;
const PICO_PER_USDC = 1_000_000_000_000n;
/** Pico-USDC per 1000 rows to micro-USDC per row. */
const DIVISOR = 1000n * PICO_PER_MICRO;

/** The price a provider's settings stand for: each rate times the markup, the minimum as it is. */
export function priceOf(settings: PriceSettings): Price {
  const markup = settings.markupPpm;
  const price: Price = { picoUsdcPer1000Rows: settings.priceMicroPer1000Rows * markup };
  if (settings.minimumMicroPerStatement) price.minimumMicro = settings.minimumMicroPerStatement;
  if (settings.priceMicroPerMB) price.picoUsdcPerMB = settings.priceMicroPerMB * markup;
  if (settings.priceMicroPerSecond) price.picoUsdcPerSecond = settings.priceMicroPerSecond * markup;
  const tables = settings.tablePricesMicroPer1000Rows;
  if (tables && tables.size > 0)
    price.tablePicoUsdcPer1000Rows = new Map([...tables].map(([name, micro]) => [name, micro * markup]));
  return price;
}

/** Whether the price charges nothing (then no hold is needed and no row is limited). */
export function isFree(price: Price): boolean {
  return price.picoUsdcPer1000Rows === 0n && isRowsOnly(price);
}

/**
 * The rows part of the cost rule: rowCount x basePricePer1000Rows / 1000 x markupMultiplier, computed exactly and
 * rounded up to the next micro-USDC. 0 rows cost 0. For a price with rows alone it is the whole rule
 * ({@link statementCost}).
 */
export function costOfRows(rowCount: bigint | number, price: Price): bigint {
  const rows = BigInt(rowCount);
  if (rows < 0n) throw new RangeError(`rowCount must not be negative, got ${rows}`);
  return (rows * price.picoUsdcPer1000Rows + DIVISOR - 1n) / DIVISOR;
}

/**
 * The largest row count whose cost fits in `budgetMicro`: the proxy uses it to know how many rows a
 * reservation pays for before it must grow.
 */
export function rowsAffordable(budgetMicro: bigint, price: Price): bigint {
  if (price.picoUsdcPer1000Rows === 0n) return BigInt(Number.MAX_SAFE_INTEGER);
  if (budgetMicro <= 0n) return 0n;
  return (budgetMicro * DIVISOR) / price.picoUsdcPer1000Rows;
}

/**
 * USDC per 1000 rows as agents read it (`SHOW pgtoll.price`, MCP's `pricePer1000Rows`): exact, with at least 6
 * decimals and at most 12, trailing zeros past the sixth cut.
 */
export function formatPricePer1000Rows(price: Price): string {
  const whole = price.picoUsdcPer1000Rows / PICO_PER_USDC;
  const fraction = (price.picoUsdcPer1000Rows % PICO_PER_USDC)
    .toString()
    .padStart(12, "0")
    .replace(/0{1,6}$/, "");
  return `${whole}.${fraction.padEnd(6, "0")}`;
}

/** The price a {@link formatPricePer1000Rows} text stands for; null for text that is not such a value. */
export function parsePricePer1000Rows(text: string): Price | null {
  const match = /^(\d{1,12})\.(\d{1,12})$/.exec(text.trim());
  if (!match) return null;
  return { picoUsdcPer1000Rows: BigInt(match[1]!) * PICO_PER_USDC + BigInt(match[2]!.padEnd(12, "0")) };
}

/**
 * What one statement used, as the cost rule reads it: rows sent (or written), result bytes (the DataRow payloads
 * sent to the agent) and milliseconds of statement time on the provider's database.
 */
export interface StatementUsage {
  rows: number | bigint;
  bytes?: number | bigint;
  ms?: number | bigint;
}

/** A statement's cost and its parts, each part rounded up to the micro-USDC for display (the total is rounded once). */
export interface CostBreakdown {
  rows: bigint;
  bytes: bigint;
  ms: bigint;
  rowsMicro: bigint;
  bytesMicro: bigint;
  timeMicro: bigint;
  /** The provider's minimum per statement was charged instead of the sum of the parts. */
  minimumApplied: boolean;
  costMicro: bigint;
}

/** 10^-18 USDC per micro-USDC: the unit in which the three parts of a cost add up exactly. */
const ATTO_PER_MICRO = 1_000_000_000_000n;

function count(value: number | bigint | undefined, name: string): bigint {
  if (value === undefined) return 0n;
  const exact = typeof value === "bigint" ? value : BigInt(Math.ceil(value));
  if (exact < 0n) throw new RangeError(`${name} must not be negative, got ${exact}`);
  return exact;
}

function ceilDiv(numerator: bigint, divisor: bigint): bigint {
  return (numerator + divisor - 1n) / divisor;
}

/**
 * The cost rule, the only implementation every surface calls:
 * max(minimum, markup x (rows x base / 1000 + MB x pricePerMB + seconds x pricePerSecond)), where MB is 10^6
 * bytes and time counts whole milliseconds. The sum is exact and rounded up once to the next micro-USDC. A price
 * with rows alone charges exactly {@link costOfRows}.
 */
export function costBreakdown(usage: StatementUsage, price: Price): CostBreakdown {
  const rows = count(usage.rows, "rows");
  const bytes = count(usage.bytes, "bytes");
  const ms = count(usage.ms, "ms");
  const rowsAtto = rows * price.picoUsdcPer1000Rows * 1000n;
  const bytesAtto = bytes * (price.picoUsdcPerMB ?? 0n);
  const timeAtto = ms * (price.picoUsdcPerSecond ?? 0n) * 1000n;
  const sum = ceilDiv(rowsAtto + bytesAtto + timeAtto, ATTO_PER_MICRO);
  const minimum = price.minimumMicro ?? 0n;
  return {
    rows,
    bytes,
    ms,
    rowsMicro: ceilDiv(rowsAtto, ATTO_PER_MICRO),
    bytesMicro: ceilDiv(bytesAtto, ATTO_PER_MICRO),
    timeMicro: ceilDiv(timeAtto, ATTO_PER_MICRO),
    minimumApplied: minimum > sum,
    costMicro: minimum > sum ? minimum : sum,
  };
}

/**
 * The time bound: the most whole milliseconds of statement time that `budgetMicro` pays for, by the cost rule, on
 * top of what the statement used besides (its rows and bytes so far; the minimum counts, as the charge is at
 * least that). 0 when the budget pays for no time at all; Infinity when the price does not count time. Every
 * surface bounds a statement's time with it (the wire proxy's hold and session budget, REST's funds and maxCost).
 */
export function msAffordable(budgetMicro: bigint, usage: Omit<StatementUsage, "ms">, price: Price): number {
  const perMs = (price.picoUsdcPerSecond ?? 0n) * 1000n;
  if (perMs === 0n) return Number.POSITIVE_INFINITY;
  if (budgetMicro < (price.minimumMicro ?? 0n)) return 0;
  const used =
    count(usage.rows, "rows") * price.picoUsdcPer1000Rows * 1000n +
    count(usage.bytes, "bytes") * (price.picoUsdcPerMB ?? 0n);
  const left = budgetMicro * ATTO_PER_MICRO - used;
  if (left <= 0n) return 0;
  const ms = left / perMs;
  return ms > BigInt(Number.MAX_SAFE_INTEGER) ? Number.MAX_SAFE_INTEGER : Number(ms);
}

/** {@link costBreakdown}'s total alone. */
export function statementCost(usage: StatementUsage, price: Price): bigint {
  if (isRowsOnly(price)) return costOfRows(usage.rows, price);
  return costBreakdown(usage, price).costMicro;
}

/** Whether the price charges rows alone (the spec's rule): no minimum, no per-MB or per-second part, no table price. */
export function isRowsOnly(price: Price): boolean {
  return (
    !price.minimumMicro &&
    !price.picoUsdcPerMB &&
    !price.picoUsdcPerSecond &&
    (price.tablePicoUsdcPer1000Rows === undefined || price.tablePicoUsdcPer1000Rows.size === 0)
  );
}

/**
 * The price a statement's rows are charged at, from the relations it reads: the highest among them, a relation
 * without a price of its own counting at the provider's base price. `relations` undefined means pgtoll cannot
 * see what the statement reads (EXECUTE of a prepared statement, FETCH from a cursor): then the highest price
 * the provider set applies, so that no table price can be walked around.
 */
export function priceForRelations(price: Price, relations: readonly string[] | undefined): Price {
  const tables = price.tablePicoUsdcPer1000Rows;
  if (tables === undefined || tables.size === 0) return price;
  let rowPrice: bigint | undefined;
  if (relations === undefined) {
    rowPrice = price.picoUsdcPer1000Rows;
    for (const tablePrice of tables.values()) if (tablePrice > rowPrice) rowPrice = tablePrice;
  } else {
    for (const relation of relations) {
      const tablePrice = tablePriceOf(tables, relation) ?? price.picoUsdcPer1000Rows;
      if (rowPrice === undefined || tablePrice > rowPrice) rowPrice = tablePrice;
    }
  }
  if (rowPrice === undefined || rowPrice === price.picoUsdcPer1000Rows) return price;
  return { ...price, picoUsdcPer1000Rows: rowPrice };
}

/**
 * A relation's own price: `schema.table` matches its key and the key `table`; an unqualified `table` matches
 * `table` and every `schema.table` key (it may resolve to any of them), the highest winning. Undefined when no
 * key matches: the relation is not a priced table. The one matching of relation names to table prices.
 */
export function tablePriceOf(tables: ReadonlyMap<string, bigint>, relation: string): bigint | undefined {
  const dot = relation.lastIndexOf(".");
  if (dot >= 0) {
    const qualified = tables.get(relation);
    const bare = tables.get(relation.slice(dot + 1));
    if (qualified === undefined) return bare;
    return bare === undefined || qualified > bare ? qualified : bare;
  }
  let highest = tables.get(relation);
  for (const [key, tablePrice] of tables)
    if (key.endsWith(`.${relation}`) && (highest === undefined || tablePrice > highest)) highest = tablePrice;
  return highest;
}

/** Pico-USDC as exact USDC text: at least 6 decimals, at most 12. */
function formatPico(pico: bigint): string {
  return formatPricePer1000Rows({ picoUsdcPer1000Rows: pico });
}

/** Exact USDC text (at most 12 decimals) as pico-USDC; null when it is not such a value. */
function parsePico(text: string): bigint | null {
  return parsePricePer1000Rows(text)?.picoUsdcPer1000Rows ?? null;
}

/**
 * The whole price as agents read it (`SHOW pgtoll.price`, MCP): the rows price alone (`0.060000`) when the
 * provider prices rows only, else every dimension, markup applied, separated by "; ":
 * `0.060000 per 1000 rows; minimum 0.000500 per statement; 2.400000 per MB; 0.012000 per second;
 * table orders 6.000000 per 1000 rows`. {@link parsePrice} reads it back exactly.
 */
export function formatPrice(price: Price): string {
  const rows = formatPricePer1000Rows(price);
  if (isRowsOnly(price)) return rows;
  const parts = [`${rows} per 1000 rows`];
  if (price.minimumMicro)
    parts.push(`minimum ${formatPico(price.minimumMicro * PICO_PER_MICRO)} per statement`);
  if (price.picoUsdcPerMB) parts.push(`${formatPico(price.picoUsdcPerMB)} per MB`);
  if (price.picoUsdcPerSecond) parts.push(`${formatPico(price.picoUsdcPerSecond)} per second`);
  for (const [table, pico] of price.tablePicoUsdcPer1000Rows ?? [])
    parts.push(`table ${JSON.stringify(table)} ${formatPico(pico)} per 1000 rows`);
  return parts.join("; ");
}

/** The price a {@link formatPrice} text stands for; null for any other text. */
export function parsePrice(text: string): Price | null {
  const [first, ...rest] = text.trim().split("; ");
  const rows = /^(\S+)(?: per 1000 rows)?$/.exec(first ?? "");
  const price = rows ? parsePricePer1000Rows(rows[1]!) : null;
  if (!price || (rest.length > 0 && !first!.endsWith(" per 1000 rows"))) return null;
  const tables = new Map<string, bigint>();
  for (const part of rest) {
    const match =
      /^minimum (\S+) per statement$|^(\S+) per MB$|^(\S+) per second$|^table ("(?:[^"\\]|\\.)*") (\S+) per 1000 rows$/.exec(
        part,
      );
    const value = match && parsePico(match[1] ?? match[2] ?? match[3] ?? match[5]!);
    if (value === null || value === undefined) return null;
    if (match![1] !== undefined) {
      if (value % PICO_PER_MICRO !== 0n) return null;
      price.minimumMicro = value / PICO_PER_MICRO;
    } else if (match![2] !== undefined) price.picoUsdcPerMB = value;
    else if (match![3] !== undefined) price.picoUsdcPerSecond = value;
    else tables.set(JSON.parse(match![4]!) as string, value);
  }
  if (tables.size > 0) price.tablePicoUsdcPer1000Rows = tables;
  return price;
}
