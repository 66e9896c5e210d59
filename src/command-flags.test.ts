import { describe, expect, it } from "vitest";
import {
  asksForHelp,
  editDistance,
  nearestFlag,
  takeFlags,
  UsageError,
  unexpectedArgument,
} from "./command-flags.js";

describe("takeFlags", () => {
  it("takes known flags in both spellings and leaves the rest in order", () => {
    expect(
      takeFlags(["--amount", "5", "--data-dir=/tmp/x", "--help", "--http-port", "0"], {
        amount: "value",
        help: "boolean",
      }),
    ).toEqual({ values: { amount: "5", help: true }, rest: ["--data-dir=/tmp/x", "--http-port", "0"] });
    expect(takeFlags(["--amount=0.5"], { amount: "value" }).values).toEqual({ amount: "0.5" });
  });

  it("refuses a value flag without a value and a boolean flag with one", () => {
    expect(() => takeFlags(["--amount"], { amount: "value" })).toThrow(UsageError);
    expect(() => takeFlags(["--amount="], { amount: "value" })).toThrow(/--amount needs a value/);
    expect(() => takeFlags(["--help=yes"], { help: "boolean" })).toThrow(/--help takes no value/);
  });
});

describe("nearestFlag", () => {
  const known = ["http-port", "proxy-port", "host", "data-dir", "database-url", "email", "org"];

  it("counts insertions, deletions, substitutions and swapped neighbours as one edit each", () => {
    expect(editDistance("htp-port", "http-port")).toBe(1);
    expect(editDistance("emial", "email")).toBe(1);
    expect(editDistance("data-dri", "data-dir")).toBe(1);
    expect(editDistance("kitten", "sitting")).toBe(3);
    expect(editDistance("", "abc")).toBe(3);
  });

  it("names the known flag a typo is nearest to", () => {
    expect(nearestFlag("htp-port", known)).toBe("http-port");
    expect(nearestFlag("proxyport", known)).toBe("proxy-port");
    expect(nearestFlag("emial", known)).toBe("email");
    expect(nearestFlag("databse-url", known)).toBe("database-url");
  });

  it("names none when nothing is near", () => {
    expect(nearestFlag("verbose", known)).toBeUndefined();
    expect(nearestFlag("x", known)).toBeUndefined();
    expect(nearestFlag("port", [])).toBeUndefined();
  });

  it("says so in the error for an unexpected flag, and leaves a stray word as it is", () => {
    expect(unexpectedArgument(["--provder", "x"], ["provider", "url"], "Usage: x").message).toBe(
      "--provder is not a known option (did you mean --provider?)\n\nUsage: x",
    );
    expect(unexpectedArgument(["extra"], ["provider"], "Usage: x").message).toMatch(
      /^unexpected argument "extra"/,
    );
  });

  it("sees --help and -h anywhere, and nothing else, as a request for usage", () => {
    expect(asksForHelp(["--http-port", "1", "--help"])).toBe(true);
    expect(asksForHelp(["-h"])).toBe(true);
    expect(asksForHelp(["--helpful", "-H", "help"])).toBe(false);
  });
});
