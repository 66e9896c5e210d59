import { type ChildProcess, spawn } from "node:child_process";
import { closeSync, openSync, readFileSync } from "node:fs";

/**
 * Starts `node <args>` and resolves once its stdout prints a line starting with `readyPrefix` (the line is
 * returned). Its stderr is appended to `logFile`. Rejects, quoting the log's tail, if it exits or takes longer
 * than `timeoutMs` first.
 */
export async function spawnNodeUntilReady(
  args: readonly string[],
  options: { cwd: string; env: NodeJS.ProcessEnv; logFile: string; readyPrefix: string; timeoutMs?: number },
): Promise<{ child: ChildProcess; line: string }> {
  const logFd = openSync(options.logFile, "a");
  const child = spawn(process.execPath, args, {
    cwd: options.cwd,
    env: options.env,
    stdio: ["ignore", "pipe", logFd],
  });
  closeSync(logFd);
  const logTail = () => readFileSync(options.logFile, "utf8").trim().split("\n").slice(-5).join("\n");
  const line = await new Promise<string>((resolve, reject) => {
    let out = "";
    const onExit = (code: number | null) => {
      clearTimeout(timer);
      reject(new Error(`${args.join(" ")} exited with ${code} before it was ready:\n${logTail()}`));
    };
    const timer = setTimeout(() => {
      child.off("exit", onExit);
      child.kill("SIGKILL");
      reject(
        new Error(
          `${args.join(" ")} was not ready within ${options.timeoutMs ?? 60_000} ms; see ${options.logFile}`,
        ),
      );
    }, options.timeoutMs ?? 60_000);
    child.once("exit", onExit);
    const onData = (chunk: string) => {
      out += chunk;
      const found = out.split("\n").find((l) => l.startsWith(options.readyPrefix));
      if (found) {
        clearTimeout(timer);
        child.off("exit", onExit);
        child.stdout!.off("data", onData);
        resolve(found.trim());
      }
    };
    child.stdout!.setEncoding("utf8").on("data", onData);
  });
  return { child, line };
}

/** SIGTERM, then SIGKILL after `graceMs`; resolves when the process is gone. */
export async function stopChild(child: ChildProcess, graceMs = 30_000): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  child.kill("SIGTERM");
  const timer = setTimeout(() => child.kill("SIGKILL"), graceMs);
  await exited;
  clearTimeout(timer);
}
