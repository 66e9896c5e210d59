import { SENSITIVE_FUNCTIONS } from "./sensitive-reads.js";
import type { GuardPolicy } from "./types.js";

/**
 * Functions no statement may call, by exact name (the last segment of the function name, lower case),
 * whatever the schema qualification. Each one either acts outside the caller's table privileges
 * (files, server signals, WAL, replication, large objects), changes session limits the provider set
 * (set_config), or runs SQL text that the guard never sees.
 */
export const FORBIDDEN_FUNCTIONS: readonly string[] = [
  // Session settings: set_config is SET without the SET allowlist.
  "set_config",
  // Other sessions and the server process.
  "pg_terminate_backend",
  "pg_cancel_backend",
  "pg_reload_conf",
  "pg_rotate_logfile",
  "pg_rotate_logfile_old",
  "pg_promote",
  "pg_switch_wal",
  "pg_switch_xlog",
  "pg_create_restore_point",
  "pg_logical_emit_message",
  "pg_log_backend_memory_contexts",
  "pg_import_system_collations",
  "pg_sync_replication_slots",
  "pg_stat_statements_reset",
  // Server files.
  "pg_stat_file",
  "pg_logdir_ls",
  // Large objects: server-side reads and writes outside table privileges.
  "loread",
  "lowrite",
  // Run SQL text: ts_stat(sqlquery), ts_rewrite(query, sqlquery).
  "ts_stat",
  "ts_rewrite",
  // NOTIFY is denied; so is its function form.
  "pg_notify",
  // Rewinds or jumps sequences the provider's application depends on.
  "setval",
  // The server's configuration, settings and build: the sensitive catalogs' rows as functions.
  ...SENSITIVE_FUNCTIONS,
];

/** Name prefixes no statement may call (same comparison as FORBIDDEN_FUNCTIONS). */
export const FORBIDDEN_FUNCTION_PREFIXES: readonly string[] = [
  "pg_read_", // pg_read_file, pg_read_binary_file
  "pg_ls_", // pg_ls_dir, pg_ls_logdir, pg_ls_waldir, pg_ls_tmpdir, ...
  "pg_file_", // adminpack: pg_file_write, pg_file_rename, pg_file_unlink, pg_file_sync
  "lo_", // lo_import, lo_export, lo_create, lo_unlink, lo_put, lo_from_bytea, lo_open, ...
  "dblink", // dblink, dblink_exec, dblink_connect, ...: SQL on another connection
  "pg_background", // pg_background_launch runs SQL text in a worker
  "query_to_xml", // query_to_xml, query_to_xmlschema, query_to_xml_and_xmlschema: run SQL text
  "cursor_to_xml", // cursor_to_xml, cursor_to_xmlschema
  "table_to_xml", // build and run SQL internally
  "schema_to_xml",
  "database_to_xml",
  "pg_advisory_", // session advisory locks can block the provider's own application
  "pg_try_advisory_",
  "pg_stat_reset", // pg_stat_reset, pg_stat_reset_shared, pg_stat_reset_single_table_counters, ...
  "pg_wal_replay_",
  "pg_backup_",
  "pg_start_backup",
  "pg_stop_backup",
  "pg_create_physical_replication_slot",
  "pg_create_logical_replication_slot",
  "pg_drop_replication_slot",
  "pg_copy_", // pg_copy_physical_replication_slot, pg_copy_logical_replication_slot
  "pg_replication_", // pg_replication_origin_*, pg_replication_slot_advance
  "pg_logical_slot_", // pg_logical_slot_get_changes consumes a slot
  "binary_upgrade_",
];

/**
 * True when `name` (a function name as the parser returns it: unquoted identifiers already folded to
 * lower case) is forbidden by `policy`. Quoted mixed-case spellings are folded too, which can only
 * over-deny.
 */
export function isForbiddenFunction(name: string, policy: GuardPolicy): boolean {
  const folded = name.toLowerCase();
  if (policy.forbiddenFunctions.has(folded)) return true;
  for (const prefix of policy.forbiddenFunctionPrefixes) {
    if (folded.startsWith(prefix)) return true;
  }
  return false;
}
