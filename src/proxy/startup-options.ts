import { normalizeAddress } from "../billing/address.js";
import { SqlState } from "../db/sql-state.js";
import { isUtf8EncodingName, SETTABLE_PARAMETERS } from "../guard/index.js";
import { clientApplicationName, withClientApplicationName } from "./client-application-name.js";
import { invalidSettingValue, SETTABLE_SETTINGS } from "./in-band-settings.js";
import { StartupRefusal } from "./proxy-errors.js";

/** Startup parameters libpq and drivers send that are not settings, or that the proxy decides itself. */
const NOT_SETTINGS = new Set([
  "user",
  "database",
  "options",
  "replication",
  "client_encoding",
  "application_name",
  "fallback_application_name",
]);
const SETTABLE = new Set(SETTABLE_PARAMETERS.map((name) => name.toLowerCase()));
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** An agent's metered session: `user` is its wallet, `database` the provider id. */
export interface SessionRequest {
  agentWallet: `0x${string}`;
  providerId: string;
  /** Settings forwarded in the upstream startup message (allowlisted only). */
  settings: Record<string, string>;
  /** The client's application_name (startup parameter, `-c` in options, or its fallback); "" for none. */
  applicationName: string;
  /** `-c pgtoll.<name>=value` settings the proxy applies itself (`SETTABLE_SETTINGS`), checked. */
  pgtollSettings: Record<string, string>;
}

/** A session to a management API endpoint: the branch role's own database, unmetered. */
export interface EndpointRequest {
  /** From `options=endpoint=<id>` or the TLS server name; otherwise it must come with the password. */
  endpointId: string | undefined;
  role: string;
  database: string;
  /** Settings the client asked for at connect time (startup parameters and `-c` options), application_name included. */
  settings: Record<string, string>;
}

/** Splits libpq `options` ("-c a=b --c=d endpoint=x") into name/value pairs; backslash escapes spaces. */
function parseOptions(options: string): [string, string][] {
  const words = options.match(/(?:\\.|\S)+/g)?.map((w) => w.replace(/\\(.)/g, "$1")) ?? [];
  const pairs: [string, string][] = [];
  for (let i = 0; i < words.length; i++) {
    let word = words[i]!;
    if (word === "-c") word = words[++i] ?? "";
    else if (word.startsWith("-c")) word = word.slice(2);
    else if (word.startsWith("--")) word = word.slice(2);
    const eq = word.indexOf("=");
    if (eq <= 0)
      throw new StartupRefusal(SqlState.protocolViolation, `invalid startup option "${word}"`, "bad_options");
    pairs.push([word.slice(0, eq).replace(/-/g, "_"), word.slice(eq + 1)]);
  }
  return pairs;
}

/** The client's settings (startup parameters that are not connection fields, then `options`) and `endpoint=`. */
function splitStartup(params: Record<string, string>): {
  endpointId: string | undefined;
  settings: [string, string][];
} {
  const replication = params.replication?.toLowerCase();
  if (replication && !["false", "off", "no", "0"].includes(replication)) {
    throw new StartupRefusal(
      SqlState.featureNotSupported,
      "replication connections are not supported by pgtoll",
      "replication",
    );
  }
  let endpointId: string | undefined;
  const settings: [string, string][] = [];
  const candidates = Object.entries(params).filter(([name]) => !NOT_SETTINGS.has(name));
  if (params.options) candidates.push(...parseOptions(params.options));
  for (const [name, value] of candidates) {
    if (name === "endpoint") endpointId = value.toLowerCase();
    else settings.push([name, value]);
  }
  return { endpointId, settings };
}

/**
 * Whether a startup is for a management API endpoint rather than an agent: it names an endpoint (in
 * `options` or by the TLS server name), or its user is not a wallet and its database not a provider id (the
 * endpoint may then come with the password, Neon's `endpoint=<id>;<password>`).
 */
export function isEndpointStartup(
  params: Record<string, string>,
  serverNameEndpoint: string | null,
): boolean {
  if (serverNameEndpoint) return true;
  if (/(^|\s)(-c\s*|--)?endpoint=/.test(params.options ?? "")) return true;
  return !normalizeAddress(params.user) && !UUID.test(params.database ?? "");
}

/**
 * Validates an agent's startup parameters: `user` is the agent's wallet, `database` the provider id; settings
 * (startup parameters or `-c` options) must be ones the guard lets a SET change, so that `statement_timeout`
 * or `role` cannot be set at connect time either; replication is refused. client_encoding is always UTF8 on
 * the upstream (the guard parses UTF-8).
 */
export function parseSessionRequest(params: Record<string, string>): SessionRequest {
  const { settings: pairs } = splitStartup(params);
  const agentWallet = normalizeAddress(params.user);
  if (!agentWallet) {
    throw new StartupRefusal(
      SqlState.invalidAuthorization,
      `user must be the agent's wallet address (0x + 40 hex digits), got "${params.user ?? ""}"`,
      "bad_user",
    );
  }
  const providerId = params.database ?? "";
  if (!UUID.test(providerId)) {
    throw new StartupRefusal(
      SqlState.invalidCatalogName,
      `database must be a provider id (a UUID), got "${providerId}"`,
      "bad_database",
    );
  }
  checkAgentEncoding(params.client_encoding);
  const settings: Record<string, string> = {};
  const named: Record<string, string> = {};
  const pgtollSettings: Record<string, string> = {};
  for (const [name, value] of pairs) {
    const pgtollName = name.toLowerCase();
    if (SETTABLE_SETTINGS.includes(pgtollName)) {
      const refused = invalidSettingValue(pgtollName, value);
      if (refused !== undefined)
        throw new StartupRefusal(SqlState.invalidParameterValue, refused, "bad_setting");
      pgtollSettings[pgtollName] = value;
      continue;
    }
    if (name === "application_name" || name === "fallback_application_name") {
      named[name] = value;
      continue;
    }
    if (name.toLowerCase() === "client_encoding") {
      // Dropped once checked: the upstream session is always UTF8.
      checkAgentEncoding(value);
      continue;
    }
    if (!SETTABLE.has(name.toLowerCase())) {
      throw new StartupRefusal(
        SqlState.insufficientPrivilege,
        `setting "${name}" at connect time is not allowed`,
        "forbidden_setting",
      );
    }
    settings[name] = value;
  }
  return {
    agentWallet,
    providerId: providerId.toLowerCase(),
    settings,
    applicationName: clientApplicationName(params, named) ?? "",
    pgtollSettings,
  };
}

/**
 * An agent session is UTF8 end to end (the guard reads the statement bytes as UTF-8), so a client encoding given
 * at connect time must be UTF8. SQL_ASCII, which libpq sends from a C locale, converts nothing either way and is
 * taken as UTF8; anything else is refused, whether a startup parameter or `-c client_encoding=` in `options`.
 */
function checkAgentEncoding(value: string | undefined): void {
  if (value === undefined || isUtf8EncodingName(value)) return;
  if (value.toLowerCase().replace(/[^a-z0-9]/g, "") === "sqlascii") return;
  throw new StartupRefusal(
    SqlState.invalidParameterValue,
    `client_encoding "${value}" is not allowed: pgtoll agent sessions are UTF8 (set client_encoding to UTF8)`,
    "forbidden_setting",
  );
}

/**
 * Reads an endpoint session's startup: the role and database as the API names them, the endpoint when the
 * startup names it, and the client's settings (any the role could SET itself; the endpoint's own rules are
 * applied when it is known). `serverNameEndpoint` is the endpoint the TLS server name designates.
 */
export function parseEndpointRequest(
  params: Record<string, string>,
  serverNameEndpoint: string | null,
): EndpointRequest {
  const { endpointId, settings: pairs } = splitStartup(params);
  const role = params.user ?? "";
  if (!role) throw new StartupRefusal(SqlState.invalidAuthorization, "no user name given", "bad_user");
  if (endpointId && serverNameEndpoint && endpointId !== serverNameEndpoint) {
    throw new StartupRefusal(
      SqlState.invalidAuthorization,
      `the endpoint option (${endpointId}) and the TLS server name (${serverNameEndpoint}) name different endpoints`,
      "endpoint_mismatch",
    );
  }
  const settings: Record<string, string> = {};
  if (params.client_encoding) settings.client_encoding = params.client_encoding;
  for (const [name, value] of pairs) settings[name] = value;
  return {
    endpointId: endpointId ?? serverNameEndpoint ?? undefined,
    role,
    database: params.database || role,
    settings: withClientApplicationName(params, settings),
  };
}
