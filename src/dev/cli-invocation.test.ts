import { describe, expect, it } from "vitest";
import { cliCommand, cliInvocation } from "./cli-invocation.js";
import { shellQuote } from "./shell-quote.js";

describe("cliInvocation", () => {
  it("names the built CLI relative to the working directory", () => {
    expect(cliInvocation(["/usr/bin/node", "/repo/dist/cli.js", "dev"], [], "/repo")).toBe(
      "node dist/cli.js",
    );
  });

  it("keeps the loader flags of a run from the sources", () => {
    expect(cliInvocation(["node", "/repo/src/cli.ts"], ["--import", "tsx"], "/repo")).toBe(
      "node --import tsx src/cli.ts",
    );
  });

  it("uses the absolute path of a script outside the working directory, quoted when needed", () => {
    expect(cliInvocation(["node", "/opt/my tools/cli.js"], [], "/home/me")).toBe(
      "node '/opt/my tools/cli.js'",
    );
  });
});

describe("cliCommand", () => {
  it("pins the loader and the script to absolute paths, for a host that starts it elsewhere", () => {
    const resolved = cliCommand(
      ["/usr/bin/node", "src/cli.ts"],
      ["--import", "tsx"],
      "/srv/pgtoll",
      (specifier) => `file:///srv/pgtoll/node_modules/${specifier}/dist/esm/index.mjs`,
    );
    expect(resolved).toEqual({
      command: process.execPath,
      args: ["--import", "/srv/pgtoll/node_modules/tsx/dist/esm/index.mjs", "/srv/pgtoll/src/cli.ts"],
    });
    expect(cliCommand(["/usr/bin/node", "dist/cli.js"], [], "/srv/pgtoll").args).toEqual([
      "/srv/pgtoll/dist/cli.js",
    ]);
  });
});

describe("shellQuote", () => {
  it("leaves plain words alone and single-quotes the rest", () => {
    expect(shellQuote("0xAbC.123/x=y")).toBe("0xAbC.123/x=y");
    expect(shellQuote("it's $HOME")).toBe(`'it'"'"'s $HOME'`);
    expect(shellQuote("")).toBe("''");
  });
});
