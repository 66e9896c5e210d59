import { describe, expect, it } from "vitest";
import { parseUpstreamTarget, startupParameters } from "./upstream-connection.js";

describe("startupParameters", () => {
  const target = parseUpstreamTarget(
    "postgres://owner:pw@db.example/app?options=-c%20search_path%3Dmyschema",
  );

  it("sends the target's options with the session's settings", () => {
    expect(startupParameters(target, { application_name: "x" })).toEqual({
      application_name: "x",
      user: "owner",
      database: "app",
      options: "-c search_path=myschema",
    });
  });

  it("never lets a setting name the user, the database, the options or replication", () => {
    const sent = startupParameters(
      { ...target, options: undefined },
      { database: "postgres", USER: "postgres", options: "-c role=postgres", replication: "database" },
    );
    expect(sent).toEqual({ user: "owner", database: "app" });
  });
});
