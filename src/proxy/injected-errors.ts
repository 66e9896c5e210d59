import { encodeParse, encodeQuery } from "./serializer.js";

/**
 * When the proxy refuses a statement it sends the upstream, in the statement's place, a text that cannot
 * parse. The upstream then does what PostgreSQL does for a failed statement (aborts the transaction block,
 * skips the rest of an extended-protocol batch until Sync, answers ReadyForQuery with the true status), and
 * the proxy swaps the upstream's syntax error for its own ErrorResponse. Nothing of the refused text runs.
 */
const UNPARSABLE = "pgtoll refused this statement";

/** Simple-protocol stand-in: answered with ErrorResponse then ReadyForQuery. */
export const refusedQuery: Buffer = encodeQuery(UNPARSABLE);

/**
 * Extended-protocol stand-in: answered with ErrorResponse; the batch ends at Sync. A Parse of a named statement,
 * since a Parse of the unnamed one would drop the client's unnamed statement before it fails.
 */
export const refusedParse: Buffer = encodeParse("pgtoll.refused", UNPARSABLE);
