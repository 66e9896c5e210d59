import {
  type CostBreakdown,
  costBreakdown,
  type Price,
  priceForRelations,
  type StatementUsage,
} from "./cost.js";

/** One statement that ran, as the cost rule reads it: what it used and the relations it names. */
export interface MeteredStatement {
  /** GuardedStatement.relations: undefined when the statement's reads are not in its text. */
  relations?: readonly string[];
  usage: StatementUsage;
}

/**
 * What the statements of one request cost, with the parts summed over its statements (the parts are each
 * rounded up to the micro-USDC; the total is each statement's cost, rounded once per statement, summed).
 */
export interface RequestCost extends Omit<CostBreakdown, "costMicro"> {
  costMicro: bigint;
}

/** The cost of no statement: what {@link addCosts} starts from. */
export const NO_COST: RequestCost = Object.freeze({
  rows: 0n,
  bytes: 0n,
  ms: 0n,
  rowsMicro: 0n,
  bytesMicro: 0n,
  timeMicro: 0n,
  minimumApplied: false,
  costMicro: 0n,
});

/** The cost rule over several statements: each statement is charged by itself (its minimum too), then summed. */
export function costOfStatements(statements: readonly MeteredStatement[], price: Price): RequestCost {
  let total = NO_COST;
  for (const statement of statements)
    total = addCosts(total, costBreakdown(statement.usage, priceForRelations(price, statement.relations)));
  return total;
}

/** Two costs summed part by part (each part was rounded on its own already). */
export function addCosts(total: RequestCost, part: RequestCost): RequestCost {
  return {
    rows: total.rows + part.rows,
    bytes: total.bytes + part.bytes,
    ms: total.ms + part.ms,
    rowsMicro: total.rowsMicro + part.rowsMicro,
    bytesMicro: total.bytesMicro + part.bytesMicro,
    timeMicro: total.timeMicro + part.timeMicro,
    minimumApplied: total.minimumApplied || part.minimumApplied,
    costMicro: total.costMicro + part.costMicro,
  };
}

/**
 * How many of a result's rows fit in `budgetMicro`: the largest count whose cost, with those rows' bytes and the
 * statement's whole time, is within the budget (0 when not even that is). `rowBytes` are the rows' sizes in
 * order. The cost grows with every row, so the first row that does not fit ends the count.
 */
export function rowsWithinBudget(
  statement: MeteredStatement,
  rowBytes: readonly number[],
  price: Price,
  budgetMicro: bigint,
): number {
  const rowPrice = priceForRelations(price, statement.relations);
  const ms = statement.usage.ms;
  let bytes = 0;
  let low = 0;
  // Linear in the rows, run only for a result that passes its budget (at most the row cap).
  for (let rows = 1; rows <= rowBytes.length; rows++) {
    bytes += rowBytes[rows - 1]!;
    if (costBreakdown({ rows, bytes, ms }, rowPrice).costMicro > budgetMicro) break;
    low = rows;
  }
  return low;
}
