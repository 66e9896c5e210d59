import { resolve } from "node:path";
import { flagName, loadConfig } from "../config.js";
import { createLogger } from "../log.js";
import { takeOverStopSignals } from "../stop-signals.js";
import { cliCommand, cliInvocation } from "./cli-invocation.js";
import { type DevStack, DevStackInterrupted, startDevStack } from "./dev-stack.js";
import { formatDevInstructions } from "./instructions.js";
import { shellQuote } from "./shell-quote.js";

/**
 * `pgtoll dev [options]`: starts the dev stack (see startDevStack), prints `pgtoll ready <http url> <proxy url>`
 * and the walk-through, and runs until SIGINT or SIGTERM, which stop everything and exit 0. Takes the options
 * of `pgtoll start`, except that the chain, token and confirmations are the dev stack's own; logs go to stderr at
 * `warn` unless LOG_LEVEL or --log-level says otherwise, so the walk-through stays readable.
 */
export async function devCommand(argv: string[], env: NodeJS.ProcessEnv = process.env): Promise<void> {
  const config = loadConfig(env, argv);
  const logFlag = `--${flagName("LOG_LEVEL")}`;
  if (!env.LOG_LEVEL && !argv.some((arg) => arg === logFlag || arg.startsWith(`${logFlag}=`)))
    config.logLevel = "warn";
  const logger = createLogger(config.logLevel);

  let stack: DevStack | undefined;
  let stopRequested = false;
  const onSignal = (signal: NodeJS.Signals) => {
    // A second signal while stopping: stop at once.
    if (stopRequested) process.exit(1);
    stopRequested = true;
    logger.info({ signal }, "stopping");
    // While starting, startDevStack notices the request between its steps and undoes them itself.
    if (stack) void stack.stop().then(() => process.exit(0));
  };
  takeOverStopSignals(onSignal);
  logger.debug("starting the dev stack");
  try {
    stack = await startDevStack(
      config,
      logger,
      () => stopRequested,
      (line) => process.stdout.write(`${line}\n`),
    );
  } catch (error) {
    if (error instanceof DevStackInterrupted) process.exit(0);
    throw error;
  }
  const dataDirFlag =
    config.dataDir === resolve(".pgtoll") ? "" : ` --data-dir ${shellQuote(config.dataDir)}`;
  const text = formatDevInstructions({ ...stack.info, cli: cliInvocation(), mcp: cliCommand(), dataDirFlag });
  process.stdout.write(`pgtoll ready ${stack.info.httpUrl} ${stack.info.proxyUrl}\n${text}\n`);
  if (stopRequested) await stack.stop().then(() => process.exit(0));
}
