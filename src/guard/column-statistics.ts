import type { Denial } from "./types.js";

/**
 * The planner's statistics hold sampled column values: `pg_stats.most_common_vals` and `histogram_bounds` give
 * about a hundred values of a column each, `pg_stats_ext(_exprs)` the same for extended statistics, and
 * `pg_statistic(_ext_data)` is where they are kept. One row of such a view carries a column's values for the
 * price of one row, whatever the provider charges for the table's own rows. Refused in any schema and any
 * spelling: every relation whose name begins with one of these (a later release's `pg_stats_*` view too), so
 * nothing needs judging again when PostgreSQL adds one. The one exception is `pg_statistic_ext`, which holds the
 * definitions of extended statistics (their columns and kinds), no value: psql's `\d` reads it.
 */
const STATISTICS_RELATION_PREFIXES = ["pg_stats", "pg_statistic"];
const STATISTICS_DEFINITIONS = "pg_statistic_ext";

/**
 * Functions that read or write the statistics: `pg_mcv_list_items` unpacks an extended statistic's most common
 * values; PostgreSQL 18's `pg_restore_*_stats` and `pg_clear_*_stats` replace them.
 */
const STATISTICS_FUNCTIONS = new Set([
  "pg_mcv_list_items",
  "pg_restore_relation_stats",
  "pg_restore_attribute_stats",
  "pg_clear_relation_stats",
  "pg_clear_attribute_stats",
]);

function denial(what: string): Denial {
  return {
    rule: "column-statistics",
    message: `reading ${what} is not allowed: the planner's statistics hold the columns' values`,
  };
}

/** A relation name (lower case, any schema) that holds the planner's statistics. */
export function checkStatisticsRelation(name: string): Denial | null {
  if (name === STATISTICS_DEFINITIONS) return null;
  return STATISTICS_RELATION_PREFIXES.some((prefix) => name.startsWith(prefix)) ? denial(name) : null;
}

/** A function name (its last segment, lower case, any schema) that reads or replaces the statistics. */
export function checkStatisticsFunction(name: string): Denial | null {
  return STATISTICS_FUNCTIONS.has(name) ? denial(`${name}()`) : null;
}
