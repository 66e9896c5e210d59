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

/**
 * Edit distance between `a` and `b`: the fewest single-character insertions, deletions, substitutions and
 * swaps of two neighbours (the usual typos) turning one into the other.
 */
export function editDistance(a: string, b: string): number {
  const rows: number[][] = [Array.from({ length: b.length + 1 }, (_, j) => j)];
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) {
      const above = rows[i - 1]!;
      let best = Math.min(above[j]! + 1, row[j - 1]! + 1, above[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1])
        best = Math.min(best, rows[i - 2]![j - 2]! + 1);
      row[j] = best;
    }
    rows.push(row);
  }
  return rows[a.length]![b.length]!;
}

/**
 * The known flag nearest to `name` by edit distance, when it is near enough to be a typo of it (one edit, or up
 * to a third of the longer name's characters, at most 3); `undefined` when none is.
 */
export function nearestFlag(name: string, known: Iterable<string>): string | undefined {
  let best: { flag: string; distance: number } | undefined;
  for (const flag of known) {
    const distance = editDistance(name, flag);
    if (!best || distance < best.distance) best = { flag, distance };
  }
  if (!best) return undefined;
  const limit = Math.min(3, Math.max(1, Math.floor(Math.max(name.length, best.flag.length) / 3)));
  return best.distance <= limit ? best.flag : undefined;
}

/** `--name is not a known option`, with `(did you mean --x?)` when a known flag is near. */
export function unknownFlagReason(name: string, known: Iterable<string>): string {
  const nearest = nearestFlag(name, known);
  return nearest ? `is not a known option (did you mean --${nearest}?)` : "is not a known option";
}

/** True when `argv` asks for the command's usage: `--help` or `-h` anywhere in it. */
export function asksForHelp(argv: readonly string[]): boolean {
  return argv.some((arg) => arg === "--help" || arg === "-h");
}

/**
 * The error for the first of `rest`, arguments a command does not take: an unknown flag names the nearest of
 * `known`; `usage` follows the message.
 */
export function unexpectedArgument(
  rest: readonly string[],
  known: Iterable<string>,
  usage: string,
): UsageError {
  const arg = rest[0] ?? "";
  if (!arg.startsWith("--")) return new UsageError(`unexpected argument "${arg}"\n\n${usage}`);
  const name = arg.slice(2).split("=")[0] ?? "";
  return new UsageError(`--${name} ${unknownFlagReason(name, known)}\n\n${usage}`);
}
