import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { OwnedTestDatabase } from "../support/database.js";
import {
  createProviderDatabase,
  registerPricedProvider,
  startTestGateway,
  type TestGateway,
} from "../support/gateway.js";

let gateway: TestGateway;
let providerDb: OwnedTestDatabase;
let provider: { providerId: string; apiKey: string };

beforeAll(async () => {
  gateway = await startTestGateway({ env: { PGTOLL_RATE_LIMIT: "on" } });
  providerDb = await createProviderDatabase(5);
  provider = await registerPricedProvider(gateway, providerDb.url);
});
afterAll(async () => {
  await gateway?.close();
  await providerDb?.drop();
});

describe("the provider's reads have their own rate limit", () => {
  it("600 per 15 minutes: a console may read past the general 100", async () => {
    let last: Awaited<ReturnType<TestGateway["app"]["inject"]>> | undefined;
    for (let i = 0; i < 101; i++) {
      last = await gateway.app.inject({
        method: "GET",
        url: `/api/providers/${provider.providerId}/${i % 2 ? "summary" : "refusals"}`,
        headers: { "x-api-key": provider.apiKey },
      });
      expect(last.statusCode, last.body).toBe(200);
    }
    expect(last?.headers["x-ratelimit-limit"]).toBe("600");
    expect(last?.headers["x-ratelimit-remaining"]).toBe("499");
  });
});
