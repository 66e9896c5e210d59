import type { CostBreakdown } from "./cost.js";
import { formatMicro } from "./money.js";

/**
 * A cost and its parts as agents read them: REST's `costBreakdown`, the proxy's `SHOW
 * pgtoll.last_statement_cost` (and through it MCP's). Each part is rounded up on its own, the total once.
 */
export function costParts(cost: Omit<CostBreakdown, "costMicro"> & { costMicro: bigint }) {
  return {
    rows: Number(cost.rows),
    bytes: Number(cost.bytes),
    milliseconds: Number(cost.ms),
    rowsCost: formatMicro(cost.rowsMicro),
    bytesCost: formatMicro(cost.bytesMicro),
    timeCost: formatMicro(cost.timeMicro),
    minimumApplied: cost.minimumApplied,
  };
}
