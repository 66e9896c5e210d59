import type { Denial } from "./types.js";

/**
 * What shows other sessions' statements or activity. Every agent of a provider runs as the provider's one
 * role, and PostgreSQL shows a role its own sessions in full (`pg_stat_activity.query` with its literals), so
 * reading these would show one agent what another is running. Refused, not filtered: a filter would have to
 * follow every view PostgreSQL and its extensions add; a refusal fails closed.
 *
 * Relations are compared in any schema (extensions such as pg_stat_statements install their views in the
 * schema the provider chose). Every `pg_stat_*` relation is refused except the cumulative counters below, so
 * a view a future PostgreSQL adds is refused until it is judged.
 */
const ACTIVITY_RELATIONS = new Set([
  "pg_locks",
  "pg_prepared_xacts",
  "pg_backend_memory_contexts",
  "pg_shmem_allocations",
  "pg_shmem_allocations_numa",
  "pg_aios",
  "pg_active_session_history",
]);

/** Extensions' views of sessions and statements: pg_wait_sampling_*, pg_qualstats*, pg_stat_kcache... */
const ACTIVITY_RELATION_PREFIXES = ["pg_wait_sampling", "pg_qualstats"];

/**
 * Cumulative counters, per database, table, index, function or server subsystem: summed over every session
 * (the provider's own application included) and flushed at most once a second, without statement text,
 * values or session identities. Readable: see docs/sql-policy.md for what they tell an agent.
 */
const CUMULATIVE_COUNTERS = new Set([
  "pg_stat_database",
  "pg_stat_database_conflicts",
  "pg_stat_all_tables",
  "pg_stat_sys_tables",
  "pg_stat_user_tables",
  "pg_stat_xact_all_tables",
  "pg_stat_xact_sys_tables",
  "pg_stat_xact_user_tables",
  "pg_stat_all_indexes",
  "pg_stat_sys_indexes",
  "pg_stat_user_indexes",
  "pg_stat_user_functions",
  "pg_stat_xact_user_functions",
  "pg_stat_archiver",
  "pg_stat_bgwriter",
  "pg_stat_checkpointer",
  "pg_stat_wal",
  "pg_stat_io",
  "pg_stat_slru",
  "pg_stat_recovery_prefetch",
  "pg_stat_replication_slots",
  "pg_stat_subscription_stats",
]);

/**
 * Functions behind those views, or that name other sessions: every `pg_stat_*` function (the per-backend
 * `pg_stat_get_activity`, `pg_stat_get_backend_*`, `pg_stat_get_progress_info`, `pg_stat_statements()`...; the
 * counters are read through their views), and the lock, wait and memory functions.
 */
const ACTIVITY_FUNCTIONS = new Set([
  "pg_lock_status",
  "pg_blocking_pids",
  "pg_safe_snapshot_blocking_pids",
  "pg_isolation_test_session_is_blocked",
  "pg_prepared_xact",
  "pg_get_backend_memory_contexts",
  "pg_get_shmem_allocations",
  "pg_get_shmem_allocations_numa",
  "pg_get_aios",
]);

const ACTIVITY_FUNCTION_PREFIXES = ["pg_stat_", "pg_wait_sampling", "pg_qualstats"];

function denial(what: string): Denial {
  return {
    rule: "other-sessions",
    message: `reading ${what} is not allowed: it shows other sessions' statements or activity`,
  };
}

/** A relation name (lower case, any schema) that shows other sessions. */
export function checkActivityRelation(name: string): Denial | null {
  // Block reads and hits per table, index and sequence: counters like the ones below.
  if (name.startsWith("pg_statio_")) return null;
  if (name.startsWith("pg_stat_")) return CUMULATIVE_COUNTERS.has(name) ? null : denial(name);
  if (ACTIVITY_RELATIONS.has(name) || ACTIVITY_RELATION_PREFIXES.some((p) => name.startsWith(p)))
    return denial(name);
  return null;
}

/** A function name (its last segment, lower case, any schema) that shows other sessions. */
export function checkActivityFunction(name: string): Denial | null {
  if (ACTIVITY_FUNCTIONS.has(name) || ACTIVITY_FUNCTION_PREFIXES.some((p) => name.startsWith(p)))
    return denial(`${name}()`);
  return null;
}
