import pg from "pg";

/** int8 (bigint) columns of the metadata database come back as JS bigint: money is never a float. */
const metadataTypes = {
  getTypeParser(oid: number, format?: "text" | "binary") {
    if (oid === pg.types.builtins.INT8) return (value: string) => BigInt(value);
    return pg.types.getTypeParser(oid, format);
  },
};

/**
 * The pool for pgtoll's own metadata and ledger database.
 * Note: bigint columns are parsed into `bigint`; never hand this pool's rows to JSON.stringify unconverted.
 */
export function createMetadataPool(connectionString: string, max = 20): pg.Pool {
  const pool = new pg.Pool({ connectionString, max, types: metadataTypes, application_name: "pgtoll" });
  // An idle client whose server went away emits 'error' on the pool; without a listener Node would crash.
  pool.on("error", () => {});
  return pool;
}
