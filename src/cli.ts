#!/usr/bin/env node
import { readFileSync } from "node:fs";
import { asksForHelp, UsageError } from "./command-flags.js";
import { ConfigError, flagName, loadConfig, optionSpecs } from "./config.js";
import { runAdminCommand } from "./control/admin-cli.js";
import { createLogger } from "./log.js";
import { takeOverStopSignals } from "./stop-signals.js";

const OPTIONS_USAGE = `Options (each also an environment variable):
${(Object.values(optionSpecs) as { env: string; defaultText?: string }[])
  .map(
    (spec) =>
      `  --${flagName(spec.env).padEnd(22)} ${spec.env}${spec.defaultText ? ` (default ${spec.defaultText})` : ""}`,
  )
  .join("\n")}
`;

const USAGE = `pgtoll: metered SQL access to PostgreSQL for agents

Usage:
  pgtoll start [options]   run the REST API (and an embedded PostgreSQL when DATABASE_URL is unset)
  pgtoll dev [options]     the local dev stack: pgtoll, a local chain, a sample provider and a funded demo
                           agent; prints psql, agent-token and curl commands that work as printed
  pgtoll agent-token --provider ID [--url PROXY_URL]
                           print an agent token signed with the key in PGTOLL_AGENT_KEY
  pgtoll mcp --provider ID [--url HTTP_URL] [--proxy POSTGRES_URL]
                           an MCP server on stdio for an agent host: query, estimate, list_tables,
                           describe_table, balance, transactions (and deposit) as the agent in
                           PGTOLL_AGENT_KEY
  pgtoll pay-query --provider ID --sql SQL [--url HTTP_URL] [--max-payment USDC]
                           run SQL with POST /api/query, paying with x402 (signed with the key in
                           PGTOLL_AGENT_KEY) when the balance cannot
  pgtoll dev-transfer --amount USDC [--provider ID | --to WALLET] [--data-dir DIR]
                           send dev USDC on a running pgtoll dev's chain to a provider (default: the
                           sample provider) from PGTOLL_AGENT_KEY's wallet or the demo agent; print the tx hash
  pgtoll dev-wallet [--usdc USDC] [--data-dir DIR]
                           make a new wallet (WALLET= and KEY= lines); with --usdc, fund it on the dev chain
  pgtoll dev-provider-db [--name NAME] [--data-dir DIR]
                           create a database of your own with a role for agents on a running pgtoll dev's
                           PostgreSQL; print its connection string
  pgtoll admin bootstrap --email EMAIL [--org NAME]
                           create a management API user (and organization); prints its first API key once
  pgtoll help [COMMAND]    this text, or COMMAND's (as does pgtoll COMMAND --help, or -h)
  pgtoll version           the version

${OPTIONS_USAGE}`;

const START_USAGE = `Usage: pgtoll start [options]

Runs pgtoll: the REST API, the wire proxy and the management API, on the metadata database of DATABASE_URL
or, when it is unset, on an embedded PostgreSQL in the data directory. Prints "pgtoll ready HTTP_URL
PROXY_URL" once it serves; SIGINT or SIGTERM drain the sessions and stop it.

${OPTIONS_USAGE}`;

const DEV_USAGE = `Usage: pgtoll dev [options]

Starts the local dev stack: an embedded PostgreSQL, a local chain with a dev USDC contract, pgtoll, a
sample provider and a funded demo agent; prints a line per step, then psql, agent-token and curl commands
that work as printed. Runs until SIGINT or SIGTERM. The chain, token and confirmations are the stack's
own; logs go to stderr at warn unless LOG_LEVEL or --log-level says otherwise.

${OPTIONS_USAGE}`;

/** Each command's usage, its module loaded only when it is asked for. */
const COMMAND_USAGE: Record<string, () => Promise<string>> = {
  start: async () => START_USAGE,
  dev: async () => DEV_USAGE,
  "agent-token": async () => (await import("./proxy/agent-token-command.js")).AGENT_TOKEN_USAGE,
  mcp: async () => (await import("./mcp/stdio-command.js")).MCP_USAGE,
  "pay-query": async () => (await import("./x402/pay-query-command.js")).PAY_QUERY_USAGE,
  "dev-transfer": async () => (await import("./dev/dev-transfer-command.js")).DEV_TRANSFER_USAGE,
  "dev-wallet": async () => (await import("./dev/dev-wallet-command.js")).DEV_WALLET_USAGE,
  "dev-provider-db": async () => (await import("./dev/dev-provider-db-command.js")).DEV_PROVIDER_DB_USAGE,
  admin: async () => `${(await import("./control/admin-cli.js")).ADMIN_USAGE}\n\n${OPTIONS_USAGE}`,
  help: async () => USAGE,
  version: async () => "Usage: pgtoll version\n\nPrints the version of pgtoll.\n",
};

/** Prints `command`'s usage (the overview when there is no such command). */
async function printUsage(command: string | undefined): Promise<void> {
  const usage = command && Object.hasOwn(COMMAND_USAGE, command) ? COMMAND_USAGE[command] : undefined;
  const text = usage ? await usage() : USAGE;
  process.stdout.write(text.endsWith("\n") ? text : `${text}\n`);
}

function version(): string {
  const pkg = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8")) as {
    version: string;
  };
  return pkg.version;
}

async function start(argv: string[]): Promise<void> {
  const config = loadConfig(process.env, argv);
  const logger = createLogger(config.logLevel);
  const { startServer } = await import("./server.js");
  let server: Awaited<ReturnType<typeof startServer>> | undefined;
  let signals = 0;
  const stop = async () => {
    await server?.drain();
    process.exit(0);
  };
  takeOverStopSignals((signal) => {
    signals++;
    if (signals > 1) {
      // The operator wants it gone: what open windows had not written is lost in the agents' favour, as in a crash.
      logger.warn({ signal }, "second stop signal: stopping at once");
      process.exit(1);
    }
    logger.info({ signal, graceMs: config.shutdownGraceMs }, "stopping: draining sessions");
    // A signal during start-up is acted on once start-up has finished (or failed and undone itself).
    if (server) void stop();
  });
  server = await startServer(config, logger);
  if (signals > 0) return stop();
  process.stdout.write(`pgtoll ready ${server.httpUrl} ${server.proxyUrl}\n`);
}

// Commands import their modules when run: a small command does not load the server.
async function main(args: string[]): Promise<void> {
  const [command = "help", ...rest] = args;
  if (Object.hasOwn(COMMAND_USAGE, command) && asksForHelp(rest)) return printUsage(command);
  switch (command) {
    case "start":
      return start(rest);
    case "dev":
      return (await import("./dev/dev-command.js")).devCommand(rest);
    case "agent-token": {
      const { agentTokenCommand } = await import("./proxy/agent-token-command.js");
      process.stdout.write(`${await agentTokenCommand(rest, process.env)}\n`);
      return;
    }
    case "mcp":
      return (await import("./mcp/stdio-command.js")).mcpCommand(rest, process.env);
    case "pay-query": {
      const { payQueryCommand } = await import("./x402/pay-query-command.js");
      process.stdout.write(`${await payQueryCommand(rest, process.env)}\n`);
      return;
    }
    case "dev-transfer": {
      const { devTransferCommand } = await import("./dev/dev-transfer-command.js");
      process.stdout.write(`${await devTransferCommand(rest, process.env)}\n`);
      return;
    }
    case "dev-wallet": {
      const { devWalletCommand } = await import("./dev/dev-wallet-command.js");
      process.stdout.write(`${await devWalletCommand(rest, process.env)}\n`);
      return;
    }
    case "dev-provider-db": {
      const { devProviderDbCommand } = await import("./dev/dev-provider-db-command.js");
      process.stdout.write(`${await devProviderDbCommand(rest, process.env)}\n`);
      return;
    }
    case "admin":
      return runAdminCommand(rest, {
        out: (line) => console.log(line),
        err: (line) => console.error(line),
      }).then((code) => {
        process.exitCode = code;
      });
    case "version":
    case "--version":
      process.stdout.write(`${version()}\n`);
      return;
    case "help":
      if (rest[0] && !Object.hasOwn(COMMAND_USAGE, rest[0])) {
        process.stderr.write(`pgtoll: unknown command "${rest[0]}"\n\n${USAGE}`);
        process.exit(2);
      }
      return printUsage(rest[0]);
    case "--help":
    case "-h":
      return printUsage(undefined);
    default:
      process.stderr.write(`pgtoll: unknown command "${command}"\n\n${USAGE}`);
      process.exit(2);
  }
}

main(process.argv.slice(2)).catch((error: unknown) => {
  const message = error instanceof ConfigError || error instanceof Error ? error.message : String(error);
  process.stderr.write(`pgtoll: ${message}\n`);
  process.exit(error instanceof UsageError ? 2 : 1);
});
