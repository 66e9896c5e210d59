import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createAgentToken } from "../../src/proxy/agent-token.js";
import type { TestDatabase } from "../support/database.js";
import {
  createProviderDatabase,
  registerPricedProvider,
  startTestGateway,
  type TestGateway,
} from "../support/gateway.js";
import { fundedTestAgent } from "../support/proxy.js";

let gateway: TestGateway;
let providerDb: TestDatabase;
let providerId: string;
let otherProviderId: string;

beforeAll(async () => {
  gateway = await startTestGateway({ env: { PGTOLL_REST_AGENT_AUTH: "signature" } });
  providerDb = await createProviderDatabase(5);
  ({ providerId } = await registerPricedProvider(gateway, providerDb.url));
  ({ providerId: otherProviderId } = await registerPricedProvider(gateway, providerDb.url));
});
afterAll(async () => {
  await gateway?.close();
  await providerDb?.drop();
});

describe("PGTOLL_REST_AGENT_AUTH=signature", () => {
  it("requires the agent's token on agent endpoints, bound to wallet and provider", async () => {
    const agent = await fundedTestAgent(gateway, providerId, 1_000_000n);
    const query = (headers: Record<string, string>) =>
      gateway.app.inject({
        method: "POST",
        url: "/api/query",
        headers,
        payload: { sql: "SELECT 1 AS one", agentWallet: agent.wallet, providerId },
      });

    const missing = await query({});
    expect(missing.statusCode).toBe(401);
    expect(missing.json().error).toMatch(/missing agent token/);

    const ok = await query({ authorization: `Bearer ${await agent.token()}` });
    expect(ok.statusCode).toBe(200);
    expect(ok.json().rows).toEqual([{ one: 1 }]);

    const otherProvider = await query({
      authorization: `Bearer ${await createAgentToken(agent.key, otherProviderId)}`,
    });
    expect(otherProvider.statusCode).toBe(401);

    const stranger = await fundedTestAgent(gateway, providerId, 0n);
    const impostor = await query({ authorization: `Bearer ${await stranger.token()}` });
    expect(impostor.statusCode).toBe(401);
    expect(impostor.json().error).toMatch(/not signed by this wallet/);

    const balance = await gateway.app.inject({
      method: "GET",
      url: `/api/balance/${agent.wallet}/${providerId}`,
      headers: { authorization: `Bearer ${await agent.token()}` },
    });
    expect(balance.statusCode).toBe(200);
    expect(
      (await gateway.app.inject({ method: "GET", url: `/api/balance/${agent.wallet}/${providerId}` }))
        .statusCode,
    ).toBe(401);

    const history = await gateway.app.inject({
      method: "GET",
      url: `/api/transactions/${agent.wallet}?providerId=${providerId}`,
      headers: { authorization: `Bearer ${await agent.token()}` },
    });
    expect(history.statusCode).toBe(200);
    const unscoped = await gateway.app.inject({
      method: "GET",
      url: `/api/transactions/${agent.wallet}`,
      headers: { authorization: `Bearer ${await agent.token()}` },
    });
    expect(unscoped.statusCode).toBe(400);
  });
});
