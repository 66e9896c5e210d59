import { describe, expect, it } from "vitest";
import { parseProviderConnection, sessionOptions } from "./connection-string.js";

describe("parseProviderConnection", () => {
  it("reads the options startup parameter, URL-decoded", () => {
    const read = parseProviderConnection(
      "postgres://u:p@db.example:6543/app?options=-c%20search_path%3Dmyschema&sslmode=require",
    );
    expect(read).toMatchObject({
      host: "db.example",
      port: 6543,
      user: "u",
      password: "p",
      database: "app",
      sslmode: "require",
      options: "-c search_path=myschema",
    });
  });

  it("reads a Neon-style endpoint option, and none when there is none", () => {
    expect(parseProviderConnection("postgres://u@h/d?options=endpoint%3Dep-cool-1").options).toBe(
      "endpoint=ep-cool-1",
    );
    expect(parseProviderConnection("postgres://u@h/d").options).toBeUndefined();
  });
});

describe("sessionOptions", () => {
  it("puts pgtoll's settings after the provider's, so PostgreSQL applies them last", () => {
    expect(
      sessionOptions("-c default_transaction_read_only=off", { default_transaction_read_only: "on" }),
    ).toBe("-c default_transaction_read_only=off -c default_transaction_read_only=on");
    expect(sessionOptions(undefined, { a: "x y" })).toBe("-c a=x\\ y");
    expect(sessionOptions(undefined)).toBeUndefined();
  });
});
