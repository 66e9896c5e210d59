/** A usage mistake on the command line; the CLI prints its message and exits with status 2. */
export class UsageError extends Error {
  override name = "UsageError";
}

/**
 * Splits `argv` into the values of the flags named in `known` (`--name value`, `--name=value`, or bare `--name`
 * for a boolean flag) and everything else, left in order for another parser (e.g. `loadConfig`).
 */
export function takeFlags(
  argv: readonly string[],
  known: Record<string, "value" | "boolean">,
): { values: Record<string, string | true>; rest: string[] } {
  const values: Record<string, string | true> = {};
  const rest: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] ?? "";
    const [name = "", inline] = arg.startsWith("--") ? arg.slice(2).split(/=(.*)/s, 2) : [""];
    const kind = known[name];
    if (!kind) {
      rest.push(arg);
      continue;
    }
    if (kind === "boolean") {
      if (inline !== undefined) throw new UsageError(`--${name} takes no value`);
      values[name] = true;
      continue;
    }
    const value = inline ?? argv[++i];
    if (value === undefined || value === "") throw new UsageError(`--${name} needs a value`);
    values[name] = value;
  }
  return { values, rest };
}
