import { isAbsolute, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { shellQuote } from "./shell-quote.js";

/**
 * The shell words that run this CLI again the way the current process was started: `node dist/cli.js` under
 * `npm run dev`, `node --import tsx src/cli.ts` from the sources. The script path is relative to `cwd` when it
 * lies inside it, so printed commands work from the directory pgtoll was started in.
 */
export function cliInvocation(
  argv: readonly string[] = process.argv,
  execArgv: readonly string[] = process.execArgv,
  cwd: string = process.cwd(),
): string {
  const script = argv[1] ?? "dist/cli.js";
  const fromCwd = relative(cwd, script);
  const path = fromCwd && !fromCwd.startsWith("..") && !isAbsolute(fromCwd) ? fromCwd : script;
  return ["node", ...execArgv, path].map(shellQuote).join(" ");
}

/**
 * This CLI as a program and its arguments with absolute paths only (node, its loader, the script), for an
 * agent host's `mcpServers` entry: hosts start servers from a directory of their own choosing.
 */
export function cliCommand(
  argv: readonly string[] = process.argv,
  execArgv: readonly string[] = process.execArgv,
  cwd: string = process.cwd(),
  resolveModule: (specifier: string) => string = (specifier) => import.meta.resolve(specifier),
): { command: string; args: string[] } {
  const args: string[] = [];
  for (let i = 0; i < execArgv.length; i++) {
    const arg = execArgv[i] ?? "";
    const value = execArgv[i + 1];
    if ((arg === "--import" || arg === "--loader" || arg === "--require") && value !== undefined) {
      // A bare specifier (tsx) resolves from the working directory: pin it to the file it names here.
      const absolute = /^[./]/.test(value) ? resolve(cwd, value) : fileURLToPath(resolveModule(value));
      args.push(arg, absolute);
      i++;
    } else {
      args.push(arg);
    }
  }
  args.push(resolve(cwd, argv[1] ?? "dist/cli.js"));
  return { command: process.execPath, args };
}
