import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";

const neonctlBin = fileURLToPath(new URL("../../node_modules/neonctl/bin/cli.js", import.meta.url));

export interface Neonctl {
  /** Runs neonctl against `apiHost` as a user would: `--api-host … --api-key …`. */
  run(args: string[]): Promise<{ code: number; stdout: string; stderr: string }>;
  /** Runs it with `--output json` and parses what it printed; throws with its output when it fails. */
  // biome-ignore lint/suspicious/noExplicitAny: neonctl prints whatever JSON the API answered
  json<T = any>(args: string[]): Promise<T>;
}

export function neonctlFor(apiHost: string, key: string, configDir: string): Neonctl {
  const run: Neonctl["run"] = (args) => {
    const all = [
      neonctlBin,
      ...args,
      "--api-host",
      apiHost,
      "--api-key",
      key,
      "--no-analytics",
      "--config-dir",
      configDir,
      "--no-color",
    ];
    return new Promise((resolve) => {
      execFile(
        process.execPath,
        all,
        { env: { ...process.env, CI: "true", NEON_API_KEY: "" }, timeout: 60_000, cwd: configDir },
        (error, stdout, stderr) =>
          resolve({ code: error ? Number((error as { code?: number }).code ?? 1) : 0, stdout, stderr }),
      );
    });
  };
  return {
    run,
    async json(args) {
      const result = await run([...args, "--output", "json"]);
      if (result.code !== 0)
        throw new Error(`neonctl ${args.join(" ")} exited ${result.code}: ${result.stderr}${result.stdout}`);
      return JSON.parse(result.stdout);
    },
  };
}
