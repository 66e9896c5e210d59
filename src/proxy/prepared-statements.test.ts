import { describe, expect, it } from "vitest";
import { PreparedStatements } from "./prepared-statements.js";

const read = { sql: "SELECT 1", writes: false };
const write = { sql: "UPDATE t SET a = 1", writes: true };
const show = { sql: "SHOW pgtoll.balance", writes: false, setting: "pgtoll.balance" };

describe("the extended protocol's names", () => {
  it("gives a portal what its statement was when it was bound", () => {
    const prepared = new PreparedStatements();
    prepared.parsed("w", write);
    prepared.bound("p", "w");
    prepared.parsed("w", read); // the unnamed-statement pattern: a name re-used for the next statement
    expect(prepared.portal("p")).toBe(write);
    prepared.bound("p", "w");
    expect(prepared.portal("p")).toBe(read);
  });

  it("forgets a name that was refused, closed or never parsed", () => {
    const prepared = new PreparedStatements();
    prepared.parsed("", show);
    prepared.parsed("", undefined); // refused by the guard
    prepared.bound("", "");
    expect(prepared.portal("")).toBeUndefined();
    prepared.parsed("s", write);
    prepared.bound("p", "s");
    prepared.closed("P", "p");
    expect(prepared.portal("p")).toBeUndefined();
    prepared.closed("S", "s");
    prepared.bound("p", "s");
    expect(prepared.portal("p")).toBeUndefined();
    prepared.bound("q", "never");
    expect(prepared.portal("q")).toBeUndefined();
  });
});
