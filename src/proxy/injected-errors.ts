import { FrontendCode } from "./message-codes.js";
import { encodeFrame, encodeQuery } from "./serializer.js";

/**
 * When the proxy refuses a statement it sends the upstream, in the statement's place, a text that cannot
 * parse. The upstream then does what PostgreSQL does for a failed statement (aborts the transaction block,
 * skips the rest of an extended-protocol batch until Sync, answers ReadyForQuery with the true status), and
 * the proxy swaps the upstream's syntax error for its own ErrorResponse. Nothing of the refused text runs.
 */
const UNPARSABLE = "pgtoll refused this statement";

/** Simple-protocol stand-in: answered with ErrorResponse then ReadyForQuery. */
export const refusedQuery: Buffer = encodeQuery(UNPARSABLE);

/** Extended-protocol stand-in (an unnamed Parse): answered with ErrorResponse; the batch ends at Sync. */
export const refusedParse: Buffer = (() => {
  const sql = Buffer.from(`${UNPARSABLE}\0`, "utf8");
  const payload = Buffer.alloc(1 + sql.length + 2);
  sql.copy(payload, 1); // name "" is the leading NUL; parameter type count 0 at the end
  return encodeFrame(FrontendCode.Parse, payload);
})();
