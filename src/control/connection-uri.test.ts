import { describe, expect, it } from "vitest";
import { connectionUri, endpointHost } from "./connection-uri.js";

describe("connection URIs", () => {
  it("name the endpoint in the host and in options, and parse back with the URL API", () => {
    const uri = connectionUri(
      { proxyHost: "db.example.com", proxyPort: 6432, proxyTls: true },
      { endpointId: "ep-calm-sea-a1b2c3d4", role: "neondb_owner", password: "p@ss:w/rd", database: "my db" },
    );
    const url = new URL(uri);
    expect(url.protocol).toBe("postgresql:");
    expect(url.hostname).toBe("ep-calm-sea-a1b2c3d4.db.example.com");
    expect(url.port).toBe("6432");
    expect(decodeURIComponent(url.username)).toBe("neondb_owner");
    expect(decodeURIComponent(url.password)).toBe("p@ss:w/rd");
    expect(decodeURIComponent(url.pathname.slice(1))).toBe("my db");
    expect(url.searchParams.get("options")).toBe("endpoint=ep-calm-sea-a1b2c3d4");
    expect(url.searchParams.get("sslmode")).toBe("require");
  });

  it("leave out the default port and add -pooler for pooled hosts", () => {
    const uri = connectionUri(
      { proxyHost: "localhost", proxyPort: 5432, proxyTls: false },
      { endpointId: "ep-a", role: "r", password: "p", database: "d" },
    );
    expect(new URL(uri).host).toBe("ep-a.localhost");
    expect(new URL(uri).searchParams.has("sslmode")).toBe(false);
    expect(endpointHost("ep-a", "localhost", true)).toBe("ep-a-pooler.localhost");
  });
});
