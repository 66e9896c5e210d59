import { isAbsolute, relative } from "node:path";
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
