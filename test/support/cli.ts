import { type ChildProcess, spawn } from "node:child_process";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("../..", import.meta.url));

/** A `pgtoll` CLI process run from the TypeScript sources, as `npm start` runs the built one. */
export interface CliProcess {
  child: ChildProcess;
  stdout(): string;
  stderr(): string;
  /** Resolves with the first stdout line matching `pattern`; rejects if the process exits first. */
  waitFor(pattern: RegExp, timeoutMs?: number): Promise<string>;
  exited: Promise<number | null>;
}

export function runCli(args: string[], env: Record<string, string | undefined> = {}): CliProcess {
  const child = spawn(process.execPath, ["--import", "tsx", "src/cli.ts", ...args], {
    cwd: root,
    // Port 0 for the proxy unless a test names one: test files run in parallel.
    env: { ...process.env, LOG_LEVEL: "warn", PGTOLL_PROXY_PORT: "0", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  let err = "";
  child.stdout?.on("data", (chunk) => (out += chunk));
  child.stderr?.on("data", (chunk) => (err += chunk));
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  return {
    child,
    stdout: () => out,
    stderr: () => err,
    exited,
    waitFor(pattern, timeoutMs = 90_000) {
      return new Promise((resolve, reject) => {
        const timer = setTimeout(
          () => reject(new Error(`timed out waiting for ${pattern}; stderr: ${err}`)),
          timeoutMs,
        );
        const check = () => {
          const line = out.split("\n").find((l) => pattern.test(l));
          if (line) {
            clearTimeout(timer);
            child.stdout?.off("data", check);
            resolve(line);
          }
        };
        child.stdout?.on("data", check);
        check();
        void exited.then((code) => {
          clearTimeout(timer);
          reject(new Error(`pgtoll exited with ${code} before printing ${pattern}; stderr: ${err}`));
        });
      });
    },
  };
}
