import { checkStatisticsRelation } from "./column-statistics.js";
import { checkActivityRelation } from "./other-sessions.js";
import type { Denial } from "./types.js";

/**
 * Catalog relations no agent may read, whatever its role: password verifiers (`pg_authid`, `pg_shadow`),
 * foreign servers' credentials (`pg_user_mapping(s)`), large object contents, the server's configuration files and build (`pg_file_settings`, `pg_hba_file_rules`,
 * `pg_ident_file_mappings`, `pg_config`), and every setting with its value (`pg_settings`, which shows server
 * paths to a privileged role). A provider's least-privilege role cannot read most of them anyway; this is
 * defence in depth for one that can. Compared lower case, unqualified or in `pg_catalog`.
 */
const SENSITIVE_RELATIONS = new Set([
  "pg_authid",
  "pg_shadow",
  "pg_user_mapping",
  "pg_user_mappings",
  "pg_largeobject",
  "pg_largeobject_metadata",
  "pg_file_settings",
  "pg_hba_file_rules",
  "pg_ident_file_mappings",
  "pg_config",
  "pg_settings",
]);

/** Functions behind those views: the same rows by another name. */
export const SENSITIVE_FUNCTIONS = [
  "pg_config",
  "pg_hba_file_rules",
  "pg_ident_file_mappings",
  "pg_show_all_file_settings",
  "pg_show_all_settings",
] as const;

/** Settings that reveal server paths, files, commands or connection strings (SHOW, current_setting). */
const SENSITIVE_SETTINGS = new Set([
  "all",
  "data_directory",
  "config_file",
  "hba_file",
  "ident_file",
  "external_pid_file",
  "unix_socket_directories",
  "log_directory",
  "ssl_cert_file",
  "ssl_key_file",
  "ssl_ca_file",
  "ssl_crl_file",
  "ssl_crl_dir",
  "ssl_dh_params_file",
  "ssl_passphrase_command",
  "krb_server_keyfile",
  "archive_command",
  "archive_library",
  "archive_cleanup_command",
  "restore_command",
  "recovery_end_command",
  "primary_conninfo",
  "dynamic_library_path",
  "shared_preload_libraries",
  "local_preload_libraries",
  "session_preload_libraries",
  "event_source",
]);

/**
 * A `RangeVar` (a relation in FROM, JOIN, COPY, TABLE) that names a sensitive catalog, a view of other
 * sessions (`other-sessions.ts`) or of the planner's statistics (`column-statistics.ts`), those two in any schema.
 */
export function checkRelationRead(relation: unknown): Denial | null {
  if (typeof relation !== "object" || relation === null) return null;
  const { schemaname, relname } = relation as { schemaname?: unknown; relname?: unknown };
  if (typeof relname !== "string") return null;
  const activity = checkActivityRelation(relname.toLowerCase());
  if (activity) return activity;
  const statistics = checkStatisticsRelation(relname.toLowerCase());
  if (statistics) return statistics;
  if (schemaname !== undefined && String(schemaname).toLowerCase() !== "pg_catalog") return null;
  if (!SENSITIVE_RELATIONS.has(relname.toLowerCase())) return null;
  return {
    rule: "sensitive-catalog",
    message: `reading ${relname} is not allowed: it holds credentials or server configuration`,
  };
}

function settingDenial(name: string): Denial {
  return {
    rule: "sensitive-setting",
    message: `reading the setting ${name} is not allowed: it reveals the server's files or commands`,
  };
}

/** `SHOW <name>` / `SHOW ALL`. */
export function checkShow(body: Record<string, unknown>): Denial | null {
  const name = typeof body.name === "string" ? body.name.toLowerCase() : "";
  return SENSITIVE_SETTINGS.has(name) ? settingDenial(name) : null;
}

/**
 * `current_setting(name [, missing_ok])`: the name must be a string literal, and not a sensitive setting. A
 * name computed at run time could be any setting, so it is refused. This reads a constant: verdict-shapes.ts
 * never generalises a text that calls it.
 */
export function checkCurrentSetting(call: Record<string, unknown>): Denial | null {
  const first = (call.args as unknown[] | undefined)?.[0] as
    | { A_Const?: { sval?: { sval?: unknown } } }
    | undefined;
  const name = first?.A_Const?.sval?.sval;
  if (typeof name !== "string") {
    return {
      rule: "sensitive-setting",
      message: "current_setting() needs the setting's name as a string literal",
    };
  }
  return SENSITIVE_SETTINGS.has(name.toLowerCase()) ? settingDenial(name) : null;
}

/** A FuncCall whose policy reads its constant arguments (see checkCurrentSetting). */
export function readsConstantArguments(call: unknown): boolean {
  const names = (call as { funcname?: { String?: { sval?: unknown } }[] } | null)?.funcname;
  const last = names?.[names.length - 1]?.String?.sval;
  return typeof last === "string" && last.toLowerCase() === "current_setting";
}

/** `FOR UPDATE / NO KEY UPDATE / SHARE / KEY SHARE` at any level of a statement. */
export const ROW_LOCK_DENIAL: Denial = {
  rule: "no-row-lock",
  message:
    "row locks (FOR UPDATE / NO KEY UPDATE / SHARE / KEY SHARE) are not allowed: they block the provider's own application",
};
