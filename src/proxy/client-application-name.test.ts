import { describe, expect, it } from "vitest";
import { withClientApplicationName } from "./client-application-name.js";
import { parseEndpointRequest } from "./startup-options.js";

describe("the client's application_name on an endpoint session", () => {
  const settled = (params: Record<string, string>) =>
    parseEndpointRequest({ user: "neondb_owner", database: "neondb", ...params }, "ep-x").settings;

  it("is the startup parameter first, then -c application_name in options, then fallback_application_name", () => {
    expect(settled({ application_name: "app", options: "-c application_name=opt" })).toEqual({
      application_name: "app",
    });
    expect(settled({ options: "-c application_name=opt", fallback_application_name: "fb" })).toEqual({
      application_name: "opt",
    });
    expect(settled({ fallback_application_name: "fb" })).toEqual({ application_name: "fb" });
    expect(settled({ options: "-c fallback_application_name=fb" })).toEqual({ application_name: "fb" });
  });

  it("is absent when the client named none, and fallback_application_name never reaches the server", () => {
    expect(settled({})).toEqual({});
    expect(withClientApplicationName({}, { search_path: "app", fallback_application_name: "fb" })).toEqual({
      search_path: "app",
      application_name: "fb",
    });
  });
});
