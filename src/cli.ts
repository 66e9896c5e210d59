#!/usr/bin/env node
import { readFileSync } from "node:fs";
import { ConfigError, flagName, loadConfig, optionSpecs } from "./config.js";
import { createLogger } from "./log.js";
import { startServer } from "./server.js";

const USAGE = `pgtoll: metered SQL access to PostgreSQL for agents

Usage:
  pgtoll start [options]   run the REST API (and an embedded PostgreSQL when DATABASE_URL is unset)
  pgtoll help              this text
  pgtoll version           the version

Options (each also an environment variable):
${(Object.values(optionSpecs) as { env: string; defaultText?: string }[])
  .map((spec) => `  --${flagName(spec.env).padEnd(22)} ${spec.env}${spec.defaultText ? ` (default ${spec.defaultText})` : ""}`)
  .join("\n")}
`;

function version(): string {
  const pkg = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8")) as { version: string };
  return pkg.version;
}

async function start(argv: string[]): Promise<void> {
  const config = loadConfig(process.env, argv);
  const logger = createLogger(config.logLevel);
  const server = await startServer(config, logger);
  let stopping = false;
  const shutdown = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, "stopping");
    await server.stop();
    process.exit(0);
  };
  process.once("SIGINT", () => void shutdown("SIGINT"));
  process.once("SIGTERM", () => void shutdown("SIGTERM"));
  process.stdout.write(`pgtoll ready ${server.httpUrl} ${server.proxyUrl}\n`);
}

async function main(args: string[]): Promise<void> {
  const [command = "help", ...rest] = args;
  switch (command) {
    case "start":
      return start(rest);
    case "version":
    case "--version":
      process.stdout.write(`${version()}\n`);
      return;
    case "help":
    case "--help":
      process.stdout.write(USAGE);
      return;
    default:
      process.stderr.write(`pgtoll: unknown command "${command}"\n\n${USAGE}`);
      process.exit(2);
  }
}

main(process.argv.slice(2)).catch((error: unknown) => {
  const message = error instanceof ConfigError || error instanceof Error ? error.message : String(error);
  process.stderr.write(`pgtoll: ${message}\n`);
  process.exit(1);
});
