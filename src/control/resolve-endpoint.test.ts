import { describe, expect, it } from "vitest";
import { endpointIdFromHost } from "./resolve-endpoint.js";

describe("endpointIdFromHost", () => {
  it("reads the endpoint id from the first label under the proxy host, with or without -pooler", () => {
    expect(endpointIdFromHost("ep-calm-sea-a1b2c3d4.db.example.com", "db.example.com")).toBe(
      "ep-calm-sea-a1b2c3d4",
    );
    expect(endpointIdFromHost("EP-Calm-Sea-A1B2C3D4-pooler.DB.example.com", "db.example.com")).toBe(
      "ep-calm-sea-a1b2c3d4",
    );
  });

  it("refuses other names", () => {
    expect(endpointIdFromHost("db.example.com", "db.example.com")).toBeNull();
    expect(endpointIdFromHost("ep-a.other.com", "db.example.com")).toBeNull();
    expect(endpointIdFromHost("x.ep-a.db.example.com", "db.example.com")).toBeNull();
    expect(endpointIdFromHost("br-a.db.example.com", "db.example.com")).toBeNull();
  });
});
