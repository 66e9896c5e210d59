import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { managementLimits } from "../../src/rest/v2/account-rate-limit.js";
import { type ManagementHarness, startManagement } from "./support.js";

let h: ManagementHarness;
beforeAll(async () => {
  h = await startManagement({ rateLimit: true });
});
afterAll(async () => {
  await h?.close();
});

describe("management API rate limits (per account)", () => {
  it("allow 40 requests a second on one route, then answer 429 with Retry-After; other accounts are not affected", async () => {
    const { key } = await h.bootstrap();
    const other = await h.bootstrap();
    const statuses: number[] = [];
    for (let i = 0; i < managementLimits.burst.max + 1; i++)
      statuses.push((await h.call(key, "GET", "/api_keys")).statusCode);
    expect(statuses.slice(0, managementLimits.burst.max).every((s) => s === 200)).toBe(true);
    const limited = await h.call(key, "GET", "/api_keys");
    expect(limited.statusCode).toBe(429);
    expect(limited.json()).toMatchObject({
      code: "TOO_MANY_REQUESTS",
      message: expect.stringMatching(/per second per route/),
    });
    expect(Number(limited.headers["retry-after"])).toBeGreaterThanOrEqual(1);
    // another route of the same account, and the same route of another account, still answer
    expect((await h.call(key, "GET", "/users/me")).statusCode).toBe(200);
    expect((await h.call(other.key, "GET", "/api_keys")).statusCode).toBe(200);
  });

  it("allow 700 requests a minute per account across routes, then answer 429", async () => {
    const { key, orgId } = await h.bootstrap("Busy");
    const routes = [
      "/api_keys",
      "/users/me",
      "/users/me/organizations",
      "/projects",
      "/projects/shared",
      `/organizations/${orgId}`,
      `/organizations/${orgId}/members`,
      `/organizations/${orgId}/api_keys`,
      `/organizations/${orgId}/invitations`,
      "/projects/no-such-project",
    ];
    const started = Date.now();
    let sent = 0;
    while (sent < managementLimits.sustained.max) {
      // stay under the per-route burst limit: at most 25 requests per route per second
      const second = Math.floor((Date.now() - started) / 1000);
      const budget = (second + 1) * routes.length * 25;
      if (sent >= budget) {
        await new Promise((resolve) => setTimeout(resolve, 20));
        continue;
      }
      const response = await h.call(key, "GET", routes[sent % routes.length]!);
      expect(response.statusCode).not.toBe(429);
      sent++;
    }
    const limited = await h.call(key, "GET", "/api_keys");
    expect(limited.statusCode).toBe(429);
    expect(limited.json().message).toMatch(/700 requests per minute per account/);
    expect(Number(limited.headers["retry-after"])).toBeGreaterThan(1);
  }, 30_000);
});
