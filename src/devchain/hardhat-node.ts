import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";

/** Hardhat network settings written into the generated config. */
export interface HardhatNodeConfig {
  chainId: number;
  mnemonic: string;
  accountCount: number;
}

/** A running `hardhat node` child process. */
export interface HardhatNode {
  rpcUrl: string;
  pid: number;
  /** Terminates the process (SIGTERM, then SIGKILL after a grace period) and removes its temp dir. */
  stop(): Promise<void>;
}

const READY_LINE = /Started HTTP and WebSocket JSON-RPC server at (http:\/\/[^\s/]+)\//;
const OUTPUT_TAIL_CHARS = 4096;
const STOP_GRACE_MS = 3000;

// Loaded into the node with --require: the parent holds the child's stdin open for its whole life,
// so EOF on stdin means the parent is gone, however it died (even SIGKILL), and the node follows,
// removing the temp dir the parent can no longer remove.
const PARENT_WATCH = `const parentGone = () => {
  require("node:fs").rmSync(__dirname, { recursive: true, force: true });
  process.exit(0);
};
process.stdin.on("end", parentGone);
process.stdin.on("error", parentGone);
process.stdin.resume();
`;

function locateHardhat(): { cliPath: string; projectRoot: string } {
  const require = createRequire(import.meta.url);
  let packageJson: string;
  try {
    packageJson = require.resolve("hardhat/package.json");
  } catch (cause) {
    throw new Error("the local chain needs the `hardhat` package (a dev dependency of pgtoll)", { cause });
  }
  const packageDir = dirname(packageJson);
  // hardhat refuses to run unless it resolves itself from the working directory, so run it from
  // the directory whose node_modules holds it.
  return {
    cliPath: join(packageDir, "internal", "cli", "cli.js"),
    projectRoot: dirname(dirname(packageDir)),
  };
}

function hardhatConfigSource(config: HardhatNodeConfig): string {
  const hardhatNetwork = {
    chainId: config.chainId,
    accounts: { mnemonic: config.mnemonic, count: config.accountCount },
    mining: { auto: true, interval: 0 },
    // Like a real node: a reverted transaction is mined and its hash returned, not thrown.
    throwOnTransactionFailures: false,
  };
  return `module.exports = ${JSON.stringify({ networks: { hardhat: hardhatNetwork } }, null, 2)};\n`;
}

/**
 * Starts `hardhat node` bound to 127.0.0.1 and resolves once it accepts JSON-RPC.
 * `port` 0 lets the OS pick a free port. The child dies with its parent (see PARENT_WATCH).
 */
export async function startHardhatNode(
  config: HardhatNodeConfig,
  port: number,
  startTimeoutMs: number,
): Promise<HardhatNode> {
  const { cliPath, projectRoot } = locateHardhat();
  const workDir = mkdtempSync(join(tmpdir(), "pgtoll-devchain-"));
  const configPath = join(workDir, "hardhat.config.cjs");
  const watchPath = join(workDir, "parent-watch.cjs");
  writeFileSync(configPath, hardhatConfigSource(config));
  writeFileSync(watchPath, PARENT_WATCH);

  const args = ["--require", watchPath, cliPath, "node", "--config", configPath];
  const child = spawn(process.execPath, [...args, "--hostname", "127.0.0.1", "--port", String(port)], {
    cwd: projectRoot,
    env: { ...process.env, HARDHAT_DISABLE_TELEMETRY_PROMPT: "true", NO_COLOR: "1", FORCE_COLOR: "0" },
    stdio: ["pipe", "pipe", "pipe"],
  });

  let outputTail = "";
  const keepTail = (chunk: Buffer) => {
    outputTail = (outputTail + chunk.toString("utf8")).slice(-OUTPUT_TAIL_CHARS);
  };
  // The node logs every RPC call; the pipes must be drained for its whole life or it blocks.
  child.stdout?.on("data", keepTail);
  child.stderr?.on("data", keepTail);

  const killOnExit = () => child.kill("SIGKILL");
  process.once("exit", killOnExit);

  let stopping: Promise<void> | undefined;
  const stop = () => {
    stopping ??= terminate(child).finally(() => {
      process.removeListener("exit", killOnExit);
      rmSync(workDir, { recursive: true, force: true });
    });
    return stopping;
  };

  try {
    const rpcUrl = await waitForReady(child, startTimeoutMs, () => outputTail);
    // From here on the chain does not keep its owner alive on its own: when the owner has nothing
    // else to do it exits, closes our stdin, and the node exits too.
    child.unref();
    for (const stream of [child.stdin, child.stdout, child.stderr]) {
      (stream as unknown as { unref?: () => void } | null)?.unref?.();
    }
    return { rpcUrl, pid: child.pid ?? -1, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}

function waitForReady(child: ChildProcess, timeoutMs: number, output: () => string): Promise<string> {
  return new Promise((resolve, reject) => {
    let buffered = "";
    const cleanup = () => {
      clearTimeout(timer);
      child.stdout?.off("data", onData);
      child.off("exit", onExit);
      child.off("error", onError);
    };
    const onData = (chunk: Buffer) => {
      buffered += chunk.toString("utf8");
      const match = READY_LINE.exec(buffered);
      if (match?.[1]) {
        cleanup();
        resolve(match[1]);
      }
    };
    const onExit = (code: number | null, signal: string | null) => {
      cleanup();
      reject(
        new Error(`hardhat node exited before it was ready (code ${code}, signal ${signal}):\n${output()}`),
      );
    };
    const onError = (error: Error) => {
      cleanup();
      reject(new Error(`could not start hardhat node: ${error.message}`, { cause: error }));
    };
    const timer = setTimeout(() => {
      cleanup();
      reject(new Error(`hardhat node was not ready after ${timeoutMs} ms:\n${output()}`));
    }, timeoutMs);
    child.stdout?.on("data", onData);
    child.once("exit", onExit);
    child.once("error", onError);
  });
}

function terminate(child: ChildProcess): Promise<void> {
  // No pid: the spawn itself failed and there is no process to wait for.
  if (child.pid === undefined || child.exitCode !== null || child.signalCode !== null)
    return Promise.resolve();
  // Hold the event loop until the exit is observed, even though the handle was unref'd.
  child.ref();
  return new Promise((resolve) => {
    const forceKill = setTimeout(() => child.kill("SIGKILL"), STOP_GRACE_MS);
    child.once("exit", () => {
      clearTimeout(forceKill);
      resolve();
    });
    child.stdin?.end();
    child.kill("SIGTERM");
  });
}
