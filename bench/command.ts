import { spawn } from "node:child_process";

export interface CommandResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs a program to completion, capturing its output. Never throws for a non-zero exit: callers judge. */
export function runCommand(
  file: string,
  args: readonly string[],
  options: { env?: NodeJS.ProcessEnv; cwd?: string } = {},
): Promise<CommandResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(file, args, {
      env: options.env ?? process.env,
      cwd: options.cwd,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk));
    child.once("error", reject);
    child.once("close", (code, signal) => resolve({ code: code ?? (signal ? 128 : 1), stdout, stderr }));
  });
}

/** Like {@link runCommand}, but a non-zero exit is an error quoting the end of stderr. */
export async function runChecked(
  file: string,
  args: readonly string[],
  options: { env?: NodeJS.ProcessEnv } = {},
): Promise<CommandResult> {
  const result = await runCommand(file, args, options);
  if (result.code !== 0) {
    const tail = (result.stderr || result.stdout).trim().split("\n").slice(-10).join("\n");
    throw new Error(`${file} ${args.join(" ")} exited with ${result.code}:\n${tail}`);
  }
  return result;
}

/** Environment for libpq programs (pgbench): no TLS or GSS negotiation, the password from the environment. */
export function libpqEnv(password: string): NodeJS.ProcessEnv {
  return {
    ...process.env,
    PGPASSWORD: password,
    PGSSLMODE: "disable",
    PGGSSENCMODE: "disable",
    PGCONNECT_TIMEOUT: "30",
  };
}
