import pg from "pg";

/**
 * The cost rule as the docs state it, computed here apart from pgtoll's own implementation, so that a test
 * checks a charge against an independent figure: max(minimum, markup x (rows x base / 1000 + MB x perMB +
 * seconds x perSecond)), rounded up once to the micro-USDC. Prices are in micro-USDC, markup in millionths.
 */
export interface TestPrices {
  basePerThousandRowsMicro: bigint;
  markupPpm: bigint;
  minimumMicro?: bigint;
  perMBMicro?: bigint;
  perSecondMicro?: bigint;
}

export function expectedCostMicro(
  prices: TestPrices,
  usage: { rows: number; bytes?: number; ms?: number },
): bigint {
  // Everything in 10^-18 USDC, so that each part is a whole number before the one rounding.
  const m = prices.markupPpm;
  const rows = BigInt(usage.rows) * prices.basePerThousandRowsMicro * m * 1000n;
  const bytes = BigInt(usage.bytes ?? 0) * (prices.perMBMicro ?? 0n) * m;
  const time = BigInt(Math.ceil(usage.ms ?? 0)) * (prices.perSecondMicro ?? 0n) * m * 1000n;
  const micro = (rows + bytes + time + 999_999_999_999n) / 1_000_000_000_000n;
  const minimum = prices.minimumMicro ?? 0n;
  return micro > minimum ? micro : minimum;
}

/**
 * The DataRow payload bytes of each row `sql` returns in text format, measured with a plain node-postgres client
 * that keeps every value as the server's text: 2 (the field count) + per field 4 (its length) + its bytes.
 */
export async function dataRowBytes(connectionString: string, sql: string): Promise<number[]> {
  const client = new pg.Client({
    connectionString,
    types: { getTypeParser: () => (value: string) => value },
  });
  await client.connect();
  try {
    const { rows } = await client.query<Record<string, string | null>>({
      text: sql,
      rowMode: "array",
    } as never);
    return (rows as unknown as (string | null)[][]).map(
      (values) =>
        2 + values.reduce((sum, value) => sum + 4 + (value === null ? 0 : Buffer.byteLength(value)), 0),
    );
  } finally {
    await client.end();
  }
}
