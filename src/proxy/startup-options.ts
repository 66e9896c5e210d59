import { normalizeAddress } from "../billing/address.js";
import { SETTABLE_PARAMETERS } from "../guard/index.js";
import { SqlState, StartupRefusal } from "./proxy-errors.js";

/** Startup parameters libpq and drivers send that are not settings, or that the proxy decides itself. */
const NOT_SETTINGS = new Set([
  "user",
  "database",
  "options",
  "replication",
  "client_encoding",
  "application_name",
]);
const SETTABLE = new Set(SETTABLE_PARAMETERS.map((name) => name.toLowerCase()));
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export interface SessionRequest {
  agentWallet: `0x${string}`;
  providerId: string;
  /** Neon-style `options=endpoint=<id>`, for the management API's endpoints. */
  endpointId?: string;
  /** Settings forwarded in the upstream startup message (allowlisted only). */
  settings: Record<string, string>;
  applicationName: string;
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

/**
 * Validates a client's startup parameters: `user` is the agent's wallet, `database` the provider id; settings
 * (startup parameters or `-c` options) must be ones the guard lets a SET change, so that `statement_timeout`
 * or `role` cannot be set at connect time either; replication is refused. client_encoding is always UTF8 on
 * the upstream (the guard parses UTF-8).
 */
export function parseSessionRequest(params: Record<string, string>): SessionRequest {
  const replication = params.replication?.toLowerCase();
  if (replication && !["false", "off", "no", "0"].includes(replication)) {
    throw new StartupRefusal(
      SqlState.featureNotSupported,
      "replication connections are not supported by pgtoll",
      "replication",
    );
  }
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
  const settings: Record<string, string> = {};
  let endpointId: string | undefined;
  const candidates: [string, string][] = Object.entries(params).filter(([name]) => !NOT_SETTINGS.has(name));
  if (params.options) candidates.push(...parseOptions(params.options));
  for (const [name, value] of candidates) {
    if (name === "endpoint") {
      endpointId = value;
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
    ...(endpointId ? { endpointId } : {}),
    settings,
    applicationName: params.application_name ?? "",
  };
}
