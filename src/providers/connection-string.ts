import { type ConnectionOptions, parse } from "pg-connection-string";

/**
 * What pgtoll takes from a provider's connection string, for REST (node-postgres pools) and for wire and MCP
 * sessions (the proxy's own upstream connection) alike: where, as whom, how TLS is set up, and the `options`
 * startup parameter (`-c search_path=...`, or `endpoint=...` for a Neon-style upstream). Nothing else in the
 * string reaches PostgreSQL: `statement_timeout`, `application_name`, `client_encoding`, `replication` and the
 * like are pgtoll's to set, so a query parameter of that name is ignored.
 */
export interface ProviderConnection {
  host: string;
  port: number;
  user: string;
  password: string;
  database: string;
  /** The string's `sslmode`, or `require` when it asks for TLS another way (`ssl=true`), else `disable`. */
  sslmode: string;
  /** node-postgres's TLS settings for the string (certificates, verification), as its own parser reads them. */
  ssl: ConnectionOptions["ssl"];
  /** `direct` for TLS from the first byte (node-postgres only; the wire proxy's own connection negotiates). */
  sslnegotiation: ConnectionOptions["sslnegotiation"];
  /** The provider's `options` startup parameter, as given; undefined when it sets none. */
  options: string | undefined;
}

/** Reads a provider's connection string (a postgres:// URL); throws when it is not one. */
export function parseProviderConnection(connectionString: string): ProviderConnection {
  const parsed = parse(connectionString);
  const sslmode =
    new URL(connectionString).searchParams.get("sslmode") ?? (parsed.ssl ? "require" : "disable");
  return {
    host: parsed.host ?? "localhost",
    port: Number(parsed.port ?? 5432),
    user: parsed.user ?? "postgres",
    password: parsed.password ?? "",
    database: parsed.database ?? parsed.user ?? "postgres",
    sslmode,
    ssl: parsed.ssl,
    sslnegotiation: parsed.sslnegotiation,
    options: parsed.options?.trim() ? parsed.options : undefined,
  };
}

/**
 * The `options` startup parameter of a provider session: the provider's own, then pgtoll's `-c` settings, which
 * PostgreSQL applies after the provider's, so that none of the provider's replaces them.
 */
export function sessionOptions(
  provider: string | undefined,
  own: Record<string, string> = {},
): string | undefined {
  const mine = Object.entries(own).map(([name, value]) => `-c ${name}=${value.replace(/[\\\s]/g, "\\$&")}`);
  const all = [...(provider ? [provider] : []), ...mine];
  return all.length > 0 ? all.join(" ") : undefined;
}
