import { describe, expect, it } from "vitest";
import { takeFlags, UsageError } from "./command-flags.js";

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
