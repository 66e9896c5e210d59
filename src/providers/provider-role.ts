import type pg from "pg";

/**
 * Predefined roles whose membership gives administrative rights: reading or writing the server's files,
 * running programs, reading every setting or every session's statistics, signalling backends, and the like.
 * Data-access roles (`pg_read_all_data`, `pg_write_all_data`, `pg_database_owner`) are the provider's choice of
 * what agents may read and write, and are not listed. Roles a server version lacks are simply not found.
 */
export const ADMINISTRATIVE_ROLES = [
  "pg_read_server_files",
  "pg_write_server_files",
  "pg_execute_server_program",
  "pg_read_all_settings",
  "pg_read_all_stats",
  "pg_stat_scan_tables",
  "pg_monitor",
  "pg_signal_backend",
  "pg_signal_autovacuum_worker",
  "pg_checkpoint",
  "pg_maintain",
  "pg_create_subscription",
  "pg_use_reserved_connections",
] as const;

/** The role a provider's connection string logs in as, and the rights of it that agents must not inherit. */
export interface ProviderRoleCheck {
  role: string;
  /** E.g. `superuser`, `BYPASSRLS`, `member of pg_read_server_files`; empty for a least-privilege role. */
  privilegedRights: string[];
}

interface RoleRow {
  role: string;
  rolsuper: boolean;
  rolbypassrls: boolean;
  rolcreaterole: boolean;
  rolcreatedb: boolean;
  rolreplication: boolean;
  admin_roles: string[];
}

/**
 * Reads the session role's attributes and memberships. Membership counts whether or not it is inherited: a
 * member can `SET ROLE` to it (the guard forbids that, but this check does not rely on the guard). A superuser
 * is reported as `superuser` alone, since it holds every other right.
 */
export async function checkProviderRole(client: pg.Client | pg.PoolClient): Promise<ProviderRoleCheck> {
  const { rows } = await client.query<RoleRow>(
    `SELECT r.rolname AS role, r.rolsuper, r.rolbypassrls, r.rolcreaterole, r.rolcreatedb, r.rolreplication,
            ARRAY(SELECT a.rolname::text FROM pg_roles a
                   WHERE a.rolname = ANY($1::text[]) AND pg_has_role(r.oid, a.oid, 'MEMBER')
                   ORDER BY a.rolname) AS admin_roles
       FROM pg_roles r WHERE r.rolname = current_user`,
    [ADMINISTRATIVE_ROLES],
  );
  const row = rows[0];
  if (!row) throw new Error("the session's role is not in pg_roles");
  if (row.rolsuper) return { role: row.role, privilegedRights: ["superuser"] };
  const privilegedRights = [
    ...(row.rolbypassrls ? ["BYPASSRLS"] : []),
    ...(row.rolcreaterole ? ["CREATEROLE"] : []),
    ...(row.rolcreatedb ? ["CREATEDB"] : []),
    ...(row.rolreplication ? ["REPLICATION"] : []),
    ...row.admin_roles.map((name) => `member of ${name}`),
  ];
  return { role: row.role, privilegedRights };
}

/** Where the docs say how to create a role fit for agents. */
export const PROVIDER_ROLE_DOCS = "docs/security.md#a-role-for-agents";

/** The registration error for a role with rights agents must not inherit. */
export function privilegedRoleMessage(check: ProviderRoleCheck): string {
  return (
    `the role "${check.role}" has rights every agent would inherit: ${check.privilegedRights.join(", ")}. ` +
    `Register a dedicated role without them (${PROVIDER_ROLE_DOCS} gives the SQL), ` +
    "or set PGTOLL_ALLOW_PRIVILEGED_PROVIDER_ROLES=on for local experiments"
  );
}

/** Why an agent session or query is refused when the provider's role turned out to be a superuser. */
export const SUPERUSER_UPSTREAM_REFUSAL =
  "the provider's database role is a superuser, and pgtoll runs no agent session as a superuser " +
  "(the provider must connect with a role of its own; PGTOLL_ALLOW_PRIVILEGED_PROVIDER_ROLES=on allows it)";
