import type { FastifyRequest } from "fastify";
import { generatePrivateKey, privateKeyToAddress } from "viem/accounts";
import { describe, expect, it, vi } from "vitest";
import { AGENT_TOKEN_LIFETIME_S, createAgentToken, verifyAgentToken } from "../proxy/agent-token.js";
import { agentAuthentication } from "./agent-auth.js";
import type { GatewayContext } from "./context.js";

const PROVIDER = "5b0a4c1e-8a31-4d7a-9d8e-1b2c3d4e5f60";
const ISSUED_MS = 1_800_000_000_000;

function ctxWith(restAgentAuth: "wallet" | "signature"): GatewayContext {
  return { config: { restAgentAuth } } as GatewayContext;
}

function requestWith(token?: string): FastifyRequest {
  return { headers: token ? { authorization: `Bearer ${token}` } : {} } as FastifyRequest;
}

async function agent() {
  const key = generatePrivateKey();
  const wallet = privateKeyToAddress(key).toLowerCase();
  return { wallet, token: await createAgentToken(key, PROVIDER, ISSUED_MS) };
}

describe("agent authentication", () => {
  it("checks nothing when agents are identified by their wallet", async () => {
    const authenticate = agentAuthentication(ctxWith("wallet"));
    await expect(authenticate(requestWith(), "0x12", PROVIDER)).resolves.toBeUndefined();
  });

  it("verifies a token once, then takes it on trust until it expires", async () => {
    const { wallet, token } = await agent();
    const verify = vi.fn(verifyAgentToken);
    let now = ISSUED_MS + 1000;
    const authenticate = agentAuthentication(ctxWith("signature"), { verify, now: () => now });
    await authenticate(requestWith(token), wallet, PROVIDER);
    await authenticate(requestWith(token), wallet, PROVIDER);
    expect(verify).toHaveBeenCalledTimes(1);

    now = ISSUED_MS + AGENT_TOKEN_LIFETIME_S * 1000 + 999;
    await authenticate(requestWith(token), wallet, PROVIDER);
    expect(verify).toHaveBeenCalledTimes(1);

    now = ISSUED_MS + (AGENT_TOKEN_LIFETIME_S + 1) * 1000;
    await expect(authenticate(requestWith(token), wallet, PROVIDER)).rejects.toMatchObject({
      statusCode: 401,
      message: expect.stringMatching(/expired/),
    });
    expect(verify).toHaveBeenCalledTimes(2);
  });

  it("remembers a token only for the wallet and provider it was verified for", async () => {
    const { wallet, token } = await agent();
    const other = await agent();
    const authenticate = agentAuthentication(ctxWith("signature"), { now: () => ISSUED_MS });
    await authenticate(requestWith(token), wallet, PROVIDER);
    await expect(authenticate(requestWith(token), other.wallet, PROVIDER)).rejects.toMatchObject({
      statusCode: 401,
    });
    await expect(
      authenticate(requestWith(token), wallet, "6b0a4c1e-8a31-4d7a-9d8e-1b2c3d4e5f60"),
    ).rejects.toMatchObject({ statusCode: 401 });
  });

  it("does not remember a token that failed", async () => {
    const { wallet, token } = await agent();
    const verify = vi.fn(verifyAgentToken);
    const authenticate = agentAuthentication(ctxWith("signature"), { verify, now: () => ISSUED_MS });
    const forged = `${token.slice(0, -4)}0000`;
    await expect(authenticate(requestWith(forged), wallet, PROVIDER)).rejects.toMatchObject({
      statusCode: 401,
    });
    await expect(authenticate(requestWith(forged), wallet, PROVIDER)).rejects.toMatchObject({
      statusCode: 401,
    });
    expect(verify).toHaveBeenCalledTimes(2);
  });

  it("answers 401 without a token and 400 without a provider", async () => {
    const { wallet, token } = await agent();
    const authenticate = agentAuthentication(ctxWith("signature"));
    await expect(authenticate(requestWith(), wallet, PROVIDER)).rejects.toMatchObject({ statusCode: 401 });
    await expect(authenticate(requestWith(token), wallet, undefined)).rejects.toMatchObject({
      statusCode: 400,
    });
  });
});
