import { describe, expect, it } from "vitest";
import { isEndpointStartup, parseEndpointRequest, parseSessionRequest } from "./startup-options.js";

const wallet = "0x52908400098527886e0f7030069857d2e4169ee7";
const provider = "0b3f6a5e-2c1d-4f8e-9a7b-6c5d4e3f2a1b";

describe("startup routing", () => {
  it("tells agent sessions from endpoint sessions", () => {
    expect(isEndpointStartup({ user: wallet, database: provider }, null)).toBe(false);
    expect(isEndpointStartup({ user: "neondb_owner", database: "neondb" }, null)).toBe(true);
    expect(isEndpointStartup({ user: wallet, database: provider }, "ep-a-1")).toBe(true);
    expect(isEndpointStartup({ user: wallet, database: provider, options: "endpoint=ep-a-1" }, null)).toBe(
      true,
    );
    expect(isEndpointStartup({ user: "x", database: "y", options: "-c endpoint=ep-a-1" }, null)).toBe(true);
  });

  it("reads the endpoint from options or the server name, the role, database and settings", () => {
    expect(
      parseEndpointRequest(
        { user: "app", database: "shop", options: "endpoint=EP-Calm-1 -c search_path=a", DateStyle: "ISO" },
        null,
      ),
    ).toEqual({
      endpointId: "ep-calm-1",
      role: "app",
      database: "shop",
      settings: { DateStyle: "ISO", search_path: "a" },
    });
    expect(parseEndpointRequest({ user: "app" }, "ep-calm-1")).toMatchObject({
      endpointId: "ep-calm-1",
      database: "app",
    });
    expect(() => parseEndpointRequest({ user: "app", options: "endpoint=ep-b-1" }, "ep-a-1")).toThrow(
      /name different endpoints/,
    );
    expect(() => parseEndpointRequest({ user: "app", replication: "database" }, "ep-a-1")).toThrow(
      /replication/,
    );
  });

  it("keeps the agent rules: wallet, provider id, allowlisted settings", () => {
    expect(
      parseSessionRequest({ user: wallet, database: provider, options: "-c search_path=x" }),
    ).toMatchObject({
      agentWallet: wallet,
      providerId: provider,
      settings: { search_path: "x" },
    });
    expect(() =>
      parseSessionRequest({ user: wallet, database: provider, options: "-c statement_timeout=0" }),
    ).toThrow(/not allowed/);
    expect(() => parseSessionRequest({ user: "bob", database: provider })).toThrow(/wallet/);
  });
});

describe("an agent's client encoding at connect time", () => {
  it.each([
    ["the startup parameter", { client_encoding: "SJIS" }],
    ["-c in options", { options: "-c client_encoding=SJIS" }],
    ["--name=value in options", { options: "--client-encoding=BIG5" }],
    ["a server encoding", { options: "-c client_encoding=LATIN1" }],
  ])("refuses anything but UTF8 given as %s", (_how, extra) => {
    expect(() => parseSessionRequest({ user: wallet, database: provider, ...extra })).toThrow(
      /client_encoding ".+" is not allowed: pgtoll agent sessions are UTF8/,
    );
  });

  it.each(["standard_conforming_strings=off", "backslash_quote=on", "escape_string_warning=off"])(
    "refuses %s, which changes how the server lexes statement text",
    (option) => {
      expect(() =>
        parseSessionRequest({ user: wallet, database: provider, options: `-c ${option}` }),
      ).toThrow(/at connect time is not allowed/);
    },
  );

  it("accepts UTF8 in any spelling, and SQL_ASCII (no conversion), leaving the upstream on UTF8", () => {
    for (const value of ["UTF8", "utf-8", "Unicode", "SQL_ASCII"]) {
      const request = parseSessionRequest({
        user: wallet,
        database: provider,
        client_encoding: value,
        options: `-c client_encoding=${value}`,
      });
      expect(request.settings).toEqual({});
    }
  });
});

describe("an agent's application_name", () => {
  it("is the startup parameter, else -c in options, else the fallback, as PostgreSQL and libpq settle it", () => {
    const request = (extra: Record<string, string>) =>
      parseSessionRequest({ user: wallet, database: provider, ...extra });
    expect(request({ application_name: "a", options: "-c application_name=b" }).applicationName).toBe("a");
    expect(
      request({ options: "-c application_name=b", fallback_application_name: "c" }).applicationName,
    ).toBe("b");
    expect(request({ fallback_application_name: "c" })).toMatchObject({ applicationName: "c", settings: {} });
    expect(request({ options: "-c fallback_application_name=d" }).applicationName).toBe("d");
    expect(request({}).applicationName).toBe("");
  });
});
