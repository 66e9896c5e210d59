import { describe, expect, it } from "vitest";
import { cliInvocation } from "./cli-invocation.js";
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

describe("shellQuote", () => {
  it("leaves plain words alone and single-quotes the rest", () => {
    expect(shellQuote("0xAbC.123/x=y")).toBe("0xAbC.123/x=y");
    expect(shellQuote("it's $HOME")).toBe(`'it'"'"'s $HOME'`);
    expect(shellQuote("")).toBe("''");
  });
});
