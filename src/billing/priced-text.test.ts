import { describe, expect, it } from "vitest";
import { withheldDatabaseText, withholdsDatabaseText } from "./priced-text.js";

describe("the database's text of statements that read a priced table", () => {
  it("is withheld when the statement reads one, or is not known, and the provider prices tables", () => {
    expect(withholdsDatabaseText({ readsPricedTable: true }, true)).toBe(true);
    expect(withholdsDatabaseText(undefined, true)).toBe(true);
    expect(withholdsDatabaseText({}, true)).toBe(false);
    expect(withholdsDatabaseText(undefined, false)).toBe(false);
  });

  it("is replaced by the SQLSTATE and its class, and nothing else", () => {
    expect(withheldDatabaseText("22P02", "error")).toBe(
      "the database refused the statement (SQLSTATE 22P02, data exception); its text is withheld because the statement reads a priced table",
    );
    expect(withheldDatabaseText("01000", "notice")).toMatch(
      /^the database sent a notice \(SQLSTATE 01000, warning\)/,
    );
    expect(withheldDatabaseText("ZZ999", "error")).toMatch(/SQLSTATE ZZ999, unknown condition/);
  });
});
