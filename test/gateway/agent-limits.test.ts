import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { creditDeposit } from "../../src/billing/ledger.js";
import { createAgentToken } from "../../src/proxy/agent-token.js";
import type { TestDatabase } from "../support/database.js";
import { randomTxHash } from "../support/fixtures.js";
import {
  createProviderDatabase,
  registerPricedProvider,
  startTestGateway,
  type TestGateway,
} from "../support/gateway.js";

let gateway: TestGateway;
let providerDb: TestDatabase;
let providerId: string;
let otherProviderId: string;

beforeAll(async () => {
  gateway = await startTestGateway();
  providerDb = await createProviderDatabase(50);
  ({ providerId } = await registerPricedProvider(gateway, providerDb.url));
  ({ providerId: otherProviderId } = await registerPricedProvider(gateway, providerDb.url));
});
afterAll(async () => {
  await gateway?.close();
  await providerDb?.drop();
});

/** An agent wallet with a key, and its token for `provider`. */
async function agent(provider = providerId) {
  const key = generatePrivateKey();
  const wallet = privateKeyToAccount(key).address.toLowerCase();
  return { wallet, key, token: await createAgentToken(key, provider) };
}

function limits(method: "PUT" | "GET" | "DELETE", wallet: string, token: string | null, body?: unknown) {
  return gateway.app.inject({
    method,
    url: `/api/agents/${wallet}/limits/${providerId}`,
    headers: token === null ? {} : { authorization: `Bearer ${token}` },
    ...(body === undefined ? {} : { payload: body as Record<string, unknown> }),
  });
}

describe("/api/agents/:wallet/limits/:providerId", () => {
  it("sets, reads and removes the agent's daily limit", async () => {
    const { wallet, token } = await agent();
    await creditDeposit(gateway.ctx.db, {
      chainId: 8453,
      txHash: randomTxHash(),
      agentWallet: wallet,
      providerId,
      amountMicro: 10_000_000n,
      blockNumber: 1n,
    });
    const none = await limits("GET", wallet, token);
    expect(none.statusCode, none.body).toBe(200);
    expect(none.json()).toMatchObject({ dailyLimit: null, spentToday: "0.000000", remainingToday: null });
    const set = await limits("PUT", wallet, token, { dailyLimit: "5" });
    expect(set.statusCode, set.body).toBe(200);
    const body = set.json();
    expect(body).toMatchObject({
      providerId,
      dailyLimit: "5.000000",
      spentToday: "0.000000",
      remainingToday: "5.000000",
    });
    expect(body.resetsAt).toMatch(/T00:00:00\.000Z$/);
    expect((await limits("GET", wallet, token)).json()).toMatchObject({ dailyLimit: "5.000000" });
    expect((await limits("DELETE", wallet, token)).statusCode).toBe(204);
    expect((await limits("DELETE", wallet, token)).statusCode).toBe(404);
    expect((await limits("GET", wallet, token)).json()).toMatchObject({ dailyLimit: null });
  });

  it("answers 401 without the agent's own token for this provider, whatever the auth mode", async () => {
    const owner = await agent();
    const stranger = await agent();
    const otherProvider = await agent(otherProviderId);
    for (const token of [null, "pgtoll1.garbage", stranger.token, otherProvider.token]) {
      for (const method of ["PUT", "GET", "DELETE"] as const) {
        const res = await limits(
          method,
          owner.wallet,
          token,
          method === "PUT" ? { dailyLimit: "1" } : undefined,
        );
        expect(res.statusCode, `${method} with ${token}`).toBe(401);
        expect(res.json().error).toMatch(/agent token/);
      }
    }
    // The stranger's own token sets the stranger's limit only.
    expect((await limits("PUT", stranger.wallet, stranger.token, { dailyLimit: "1" })).statusCode).toBe(200);
    expect((await limits("GET", owner.wallet, owner.token)).json().dailyLimit).toBeNull();
  });

  it.each([["-1"], ["abc"], ["1.0000001"], ["1e3"], ["1000000001"], [""]])(
    "answers 400 for dailyLimit %j",
    async (dailyLimit) => {
      const { wallet, token } = await agent();
      const res = await limits("PUT", wallet, token, { dailyLimit });
      expect(res.statusCode).toBe(400);
      expect(res.json().error).toMatch(/dailyLimit/);
    },
  );

  it("answers 400 for a bad wallet or provider id and 404 for an unknown provider", async () => {
    const { wallet, key, token } = await agent();
    const bad = await gateway.app.inject({
      method: "GET",
      url: `/api/agents/0x123/limits/${providerId}`,
      headers: { authorization: `Bearer ${token}` },
    });
    expect(bad.statusCode).toBe(400);
    const unknown = "00000000-0000-4000-8000-000000000000";
    const missing = await gateway.app.inject({
      method: "GET",
      url: `/api/agents/${wallet}/limits/${unknown}`,
      headers: { authorization: `Bearer ${await createAgentToken(key, unknown)}` },
    });
    expect(missing.statusCode).toBe(404);
  });
});
