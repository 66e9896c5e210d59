import { formatPrice, priceOf, statementCost } from "../billing/cost.js";
import { formatMicro } from "../billing/money.js";
import { parsePriceDimensions, parsePricing } from "../billing/pricing.js";
import type { TableCount } from "./airports-tables.js";
import { dialHost, dialUrl } from "./dial-address.js";
import { shellQuote } from "./shell-quote.js";

/** Everything the printed walk-through names. */
export interface DevStackInfo {
  httpUrl: string;
  proxyUrl: string;
  /** The proxy offers TLS (PGTOLL_TLS_CERT/KEY): psql is told sslmode=require instead of disable. */
  tls: boolean;
  /** The certificate pgtoll dev made for the proxy and the names it is for; clients trust it as their root. */
  tlsRootCert?: { file: string; names: string[] };
  rpcUrl: string;
  chainId: number;
  tokenAddress: string;
  /** The sample provider; `apiKey` signs in to the console (a new one each run). */
  provider: { id: string; name: string; registered: boolean; apiKey: string };
  /** The sample provider's pricing request: the spec's two numbers, and the dimensions beyond rows. */
  price: {
    basePricePer1000Rows: number;
    markupMultiplier: number;
    minimumCostPerStatement?: number;
    pricePerMB?: number;
  };
  database: string;
  tables: TableCount[];
  agent: { wallet: string; privateKey: string; accountIndex: number };
  deposit: { txHash: string; amountMicro: bigint; balance: string };
  /**
   * A second demo wallet with dev USDC on chain and no balance with the provider: it pays with x402, at least
   * `minTopupMicro` (PGTOLL_X402_MIN_TOPUP) a payment.
   */
  x402Agent: {
    wallet: string;
    privateKey: string;
    accountIndex: number;
    onChainMicro: bigint;
    minTopupMicro: bigint;
  };
  /** An agent token made at start, for the psql line. */
  agentToken: string;
  tokenLifetimeMinutes: number;
  /** The shell words that run this CLI (see cliInvocation). */
  cli: string;
  /** `--data-dir DIR` when the data directory is not the default one, else "". */
  dataDirFlag: string;
  /** This CLI with absolute paths (see cliCommand), for the MCP configuration. */
  mcp: { command: string; args: string[] };
  /** Set when the REST gateway wants agent tokens (PGTOLL_REST_AGENT_AUTH=signature). */
  restBearer?: string;
}

/**
 * The maxCost example: a statement the planner underestimates (it multiplies the selectivities of two
 * correlated conditions: about 150 rows expected, 873 come), so its estimate is within maxCost and its rows pass it.
 */
export const MAX_COST_EXAMPLE = {
  sql: "SELECT iata_code, name FROM airports WHERE iso_country = 'US' AND iso_region LIKE 'US-%' ORDER BY name",
  maxCost: "0.02",
  caption: "about 150 of the 873 US airports (0.009 USDC)",
} as const;

/** The text `pgtoll dev` prints after its ready line: a summary, then commands that work as printed. */
export function formatDevInstructions(info: DevStackInfo): string {
  const http = dialUrl(info.httpUrl).origin;
  const proxy = dialUrl(info.proxyUrl);
  const wallet = info.agent.wallet;
  const providerId = info.provider.id;
  // No table prices here: the table-name parser (the guard's) is not needed.
  const price = priceOf({
    ...parsePricing(info.price.basePricePer1000Rows, info.price.markupMultiplier),
    ...parsePriceDimensions(info.price, () => null),
  });
  const conninfo = `host=${dialHost(proxy.hostname)} port=${proxy.port} user=${wallet} dbname=${providerId} sslmode=${info.tls ? "require" : "disable"}`;
  const tokenCommand = `PGTOLL_AGENT_KEY=${info.agent.privateKey} ${info.cli} agent-token --provider ${providerId}`;
  const auth = info.restBearer ? ` -H ${shellQuote(`Authorization: Bearer ${info.restBearer}`)}` : "";
  const curl = `curl -s -w '\\n'${auth}`;
  const json = (body: Record<string, string>) =>
    `-H 'Content-Type: application/json' -d ${shellQuote(JSON.stringify(body))}`;
  const transfer = `${info.cli} dev-transfer --amount 5${info.dataDirFlag}`;
  const depositBody = `'${JSON.stringify({ txHash: "@TX@", agentWallet: wallet, providerId }).replace("@TX@", `'$(${transfer})'`)}'`;
  const tables = info.tables.map((t) => `${t.table} (${t.rows} rows)`).join(", ");

  return [
    "",
    "pgtoll dev is up: pgtoll, its embedded PostgreSQL and a local chain. Ctrl-C stops them all.",
    "",
    `  chain        ${info.rpcUrl}, chain id ${info.chainId}, dev USDC (6 decimals) at ${info.tokenAddress}`,
    `  provider     ${info.provider.name}, id ${providerId} (${info.provider.registered ? "registered now" : "registered by an earlier run, reused"})`,
    `  price        ${formatPrice(price)} (USDC, markup included): 1000 rows of 50 bytes cost ${formatMicro(statementCost({ rows: 1000, bytes: 50_000 }, price))} USDC`,
    `  data         ${tables} in database ${info.database}`,
    `  demo agent   ${wallet} (hardhat dev account #${info.agent.accountIndex}; its key is public: never use it on a real network)`,
    `  deposit      ${formatMicro(info.deposit.amountMicro)} USDC sent on chain (tx ${info.deposit.txHash}), credited: balance ${info.deposit.balance} USDC`,
    "",
    "Run these from this directory.",
    "",
    `psql through the wire proxy; the password is an agent token, valid for ${info.tokenLifetimeMinutes} minutes:`,
    `  PGPASSWORD=${info.agentToken} psql "${conninfo}"`,
    "  then try: SELECT iata_code, name, municipality FROM airports WHERE iso_country = 'NZ' ORDER BY iata_code;",
    "",
    "When the token has expired (psql: 28P01), make a fresh one with the agent's key, or connect with one in one go:",
    `  ${tokenCommand}`,
    `  PGPASSWORD=$(${tokenCommand}) psql "${conninfo}"`,
    "",
    ...trustLines(info, conninfo, tokenCommand),
    "REST gateway: balance, a query, the ledger:",
    `  ${curl} ${http}/api/balance/${wallet}/${providerId}`,
    `  ${curl} ${http}/api/query ${json({ sql: "SELECT iata_code, name, elevation_ft FROM airports ORDER BY elevation_ft DESC NULLS LAST LIMIT 5", agentWallet: wallet, providerId })}`,
    `  ${curl} '${http}/api/transactions/${wallet}?providerId=${providerId}&limit=10'`,
    "",
    "The catalog (free): find providers by their tables, prices and terms; docs/catalog.md has more:",
    `  ${curl} '${http}/api/providers?q=airports'`,
    "",
    "Budgets the agent sets: a ceiling per query, per psql session and per day with this provider.",
    `maxCost ${MAX_COST_EXAMPLE.maxCost} (truncated: true): the planner expects ${MAX_COST_EXAMPLE.caption}, so the query`,
    `runs and is cut at the rows ${MAX_COST_EXAMPLE.maxCost} USDC pays for (actualCost at most that); an estimate above maxCost is 422, nothing run:`,
    `  ${curl} ${http}/api/query ${json({ sql: MAX_COST_EXAMPLE.sql, agentWallet: wallet, providerId, maxCost: MAX_COST_EXAMPLE.maxCost })}`,
    "In psql: SET pgtoll.max_session_cost = '0.05'; then SHOW pgtoll.session_cost; a daily limit of 1 USDC:",
    `  TOKEN=$(${tokenCommand}) && ${curl} -X PUT ${http}/api/agents/${wallet}/limits/${providerId} -H "Authorization: Bearer $TOKEN" ${json({ dailyLimit: "1" })}`,
    "",
    "MCP: add pgtoll to an agent host (Claude Desktop, Cursor, VS Code ...): this goes in its mcpServers configuration",
    ...mcpConfiguration(info).map((line) => `  ${line}`),
    "",
    `Pay as you query (x402): a second demo agent, ${info.x402Agent.wallet} (dev account #${info.x402Agent.accountIndex}), holds ${formatMicro(info.x402Agent.onChainMicro)} dev USDC`,
    "on chain and no balance here; its query is answered 402, signed for with its key, settled on chain and run.",
    `It pays the minimum top-up, ${formatMicro(info.x402Agent.minTopupMicro)} USDC (PGTOLL_X402_MIN_TOPUP); what the query does not spend stays as its balance:`,
    `  PGTOLL_AGENT_KEY=${info.x402Agent.privateKey} ${info.cli} pay-query --provider ${providerId} --sql ${shellQuote("SELECT iata_code, name FROM airports WHERE iso_country = 'IS' ORDER BY iata_code")} --url ${http} --chain-id ${info.chainId} --token-address ${info.tokenAddress}`,
    "",
    "Provider console: the sample provider's earnings, agents, statements and refusals; the demo agent's",
    "queries above show up there (proxy charges once their charge window is written, within a second).",
    `  ${http}/console#provider=${providerId}`,
    `  provider id  ${providerId}`,
    `  API key      ${info.provider.apiKey}  (a new key each run of pgtoll dev; the previous one stops working)`,
    "",
    "Deposit more: send 5 dev USDC on the local chain from the agent to the provider, then credit the transfer:",
    `  ${curl} ${http}/api/deposit -H 'Content-Type: application/json' -d ${depositBody}`,
    `  (${transfer} alone sends a transfer and prints its hash)`,
    "",
  ].join("\n");
}

/** Where the dev certificate is and how psql trusts it, and the neonctl line that needs the proxy's TLS. */
function trustLines(info: DevStackInfo, conninfo: string, tokenCommand: string): string[] {
  if (!info.tlsRootCert) return [];
  const file = shellQuote(info.tlsRootCert.file);
  const { port, hostname } = dialUrl(info.proxyUrl);
  const wildcard = info.tlsRootCert.names.findLast((name) => name.startsWith("*.")) ?? "*.localhost";
  const endpoints = wildcard.slice(1);
  return [
    `The proxy's TLS certificate, self-signed by pgtoll dev for ${info.tlsRootCert.names.join(", ")}, is ${file}:`,
    "trust it and psql checks the proxy's name too (sslmode=verify-full):",
    `  PGSSLROOTCERT=${file} PGPASSWORD=$(${tokenCommand}) psql "${conninfo.replace("sslmode=require", "sslmode=verify-full")}"`,
    `The management API's endpoints (docs/management-api.md) are ep-…${endpoints}, found by that TLS's server name;`,
    `with a key from ${info.cli} admin bootstrap --email you@example.com${info.dataDirFlag}, psql takes what neonctl prints:`,
    `  PGHOSTADDR=${dialHost(hostname)} PGPORT=${port} psql "$(npx neonctl connection-string --project-id <id> --api-host ${dialUrl(info.httpUrl).origin}/api/v2 --api-key <key>)"`,
    "",
  ];
}

/** The `mcpServers` block for the demo agent: the stdio server with deposits on, against this dev stack. */
export function mcpConfiguration(info: DevStackInfo): string[] {
  const server = {
    command: info.mcp.command,
    args: [
      ...info.mcp.args,
      "mcp",
      "--provider",
      info.provider.id,
      "--url",
      dialUrl(info.httpUrl).origin,
      "--proxy",
      `postgres://${dialHost(dialUrl(info.proxyUrl).hostname)}:${dialUrl(info.proxyUrl).port}`,
    ],
    env: {
      PGTOLL_AGENT_KEY: info.agent.privateKey,
      PGTOLL_MCP_ALLOW_DEPOSIT: "on",
      PGTOLL_MCP_DEPOSIT_MAX: "10",
      PGTOLL_RPC_URL: info.rpcUrl,
      PGTOLL_CHAIN_ID: String(info.chainId),
      PGTOLL_TOKEN_ADDRESS: info.tokenAddress,
    },
  };
  return JSON.stringify({ mcpServers: { pgtoll: server } }, null, 2).split("\n");
}
