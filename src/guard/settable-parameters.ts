/**
 * Run-time parameters an agent may change with SET / SET LOCAL / RESET under the standard policy.
 * They only change how values are presented or resolved for the agent's own session. Everything else
 * is denied, notably statement_timeout, lock_timeout, idle_in_transaction_session_timeout, work_mem,
 * role, session_authorization, standard_conforming_strings and backslash_quote (the last two change
 * how SQL text is lexed, so the guard's parse would no longer be the server's).
 */
export const SETTABLE_PARAMETERS: readonly string[] = [
  "application_name",
  "timezone", // SET TIME ZONE, SET timezone, SET "TimeZone"
  "datestyle",
  "intervalstyle",
  "search_path", // also SET SCHEMA
  "client_encoding", // also SET NAMES; UTF8 only, see settings-rule.ts
  "extra_float_digits",
  "bytea_output",
  "lc_monetary",
  "lc_numeric",
  "lc_time",
  "xmlbinary",
  "xmloption", // also SET XML OPTION
  "transaction_isolation", // the same as SET TRANSACTION ISOLATION LEVEL
  "transaction_read_only",
  "transaction_deferrable",
];
