import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestGateway, type TestGateway } from "../support/gateway.js";
import { ensureConsoleBuilt } from "./console-build.js";

let gateway: TestGateway;

beforeAll(async () => {
  await ensureConsoleBuilt();
  gateway = await startTestGateway();
});
afterAll(async () => gateway?.close());

describe("GET /console", () => {
  it("serves the bundled page, whose script and stylesheet are pgtoll's own", async () => {
    const page = await gateway.app.inject({ method: "GET", url: "/console" });
    expect(page.statusCode).toBe(200);
    expect(page.headers["content-type"]).toBe("text/html; charset=utf-8");
    expect(page.body).toContain('<script type="module" src="/console/console.js"></script>');
    expect(page.body).not.toMatch(/https?:\/\//);
    for (const [path, type] of [
      ["/console/console.js", "text/javascript; charset=utf-8"],
      ["/console/console.css", "text/css; charset=utf-8"],
    ]) {
      const asset = await gateway.app.inject({ method: "GET", url: path });
      expect(asset.statusCode, path).toBe(200);
      expect(asset.headers["content-type"]).toBe(type);
      expect(asset.body.length).toBeGreaterThan(1000);
    }
  });

  it("forbids the page every other origin (Content-Security-Policy)", async () => {
    const page = await gateway.app.inject({ method: "GET", url: "/console/" });
    const policy = String(page.headers["content-security-policy"]);
    expect(policy).toContain("default-src 'none'");
    expect(policy).toContain("connect-src 'self'");
    expect(policy).toContain("script-src 'self'");
  });

  it("serves nothing else under /console", async () => {
    const res = await gateway.app.inject({ method: "GET", url: "/console/../package.json" });
    expect(res.statusCode).toBe(404);
  });
});
