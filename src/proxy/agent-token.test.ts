import { generatePrivateKey, privateKeyToAddress } from "viem/accounts";
import { describe, expect, it } from "vitest";
import { AGENT_TOKEN_LIFETIME_S, agentOfToken, createAgentToken, verifyAgentToken } from "./agent-token.js";

const key = generatePrivateKey();
const wallet = privateKeyToAddress(key);
const provider = "6f1c2a34-1111-4222-8333-444455556666";

describe("agent tokens", () => {
  it("verifies a token signed by the wallet for the provider", async () => {
    const token = await createAgentToken(key, provider);
    expect(token).toMatch(/^pgtoll1\.\d+\.0x[0-9a-f]{40}\.0x[0-9a-f]{130}$/);
    expect(await verifyAgentToken(token, wallet, provider)).toEqual({ ok: true });
    expect(await verifyAgentToken(token, wallet.toLowerCase(), provider.toUpperCase())).toEqual({ ok: true });
  });

  it("refuses another wallet, another provider, expiry, the future and garbage", async () => {
    const now = Date.now();
    const token = await createAgentToken(key, provider, now);
    const other = privateKeyToAddress(generatePrivateKey());
    expect(await verifyAgentToken(token, other, provider)).toMatchObject({
      ok: false,
      reason: /not signed by this wallet/,
    });
    expect(await verifyAgentToken(token, wallet, "00000000-0000-4000-8000-000000000000")).toMatchObject({
      ok: false,
    });
    expect(
      await verifyAgentToken(token, wallet, provider, now + (AGENT_TOKEN_LIFETIME_S + 1) * 1000),
    ).toMatchObject({ ok: false, reason: /expired/ });
    expect(
      await verifyAgentToken(await createAgentToken(key, provider, now + 3_600_000), wallet, provider, now),
    ).toMatchObject({
      ok: false,
      reason: /future/,
    });
    for (const garbage of [
      "",
      "secret",
      "pgtoll1.x.0x00",
      `pgtoll1.1.0x${"z".repeat(130)}`,
      `pgtoll1.${Math.floor(now / 1000)}.0x${"0".repeat(130)}`,
    ]) {
      expect((await verifyAgentToken(garbage, wallet, provider)).ok).toBe(false);
    }
  });

  it("names its wallet: a token is another provider's or another wallet's whatever address its signature recovers", async () => {
    const token = await createAgentToken(key, provider);
    expect(token.split(".")[2]).toBe(wallet.toLowerCase());
    expect(await agentOfToken(token, provider)).toEqual({ ok: true, wallet: wallet.toLowerCase() });
    const otherProvider = "00000000-0000-4000-8000-000000000000";
    expect(await agentOfToken(token, otherProvider)).toMatchObject({
      ok: false,
      reason: /not signed by the wallet it names for this provider/,
    });
    const [prefix, issued, , signature] = token.split(".");
    const other = privateKeyToAddress(generatePrivateKey()).toLowerCase();
    const claimsOther = `${prefix}.${issued}.${other}.${signature}`;
    expect((await agentOfToken(claimsOther, provider)).ok).toBe(false);
    expect((await verifyAgentToken(claimsOther, wallet, provider)).ok).toBe(false);
    expect((await verifyAgentToken(claimsOther, other, provider)).ok).toBe(false);
    // without the wallet: accepted where the wallet is known (the proxy's user name), not where it is not
    const unnamed = `${prefix}.${issued}.${signature}`;
    expect(await verifyAgentToken(unnamed, wallet, provider)).toEqual({ ok: true });
    expect(await agentOfToken(unnamed, provider)).toMatchObject({ ok: false, reason: /names no wallet/ });
  });

  it("remembers a token's signer without letting the token outlive its hour or serve another provider", async () => {
    const now = Date.now();
    const token = await createAgentToken(key, provider, now);
    const otherProvider = "00000000-0000-4000-8000-000000000000";
    for (let use = 0; use < 3; use++) {
      expect(await verifyAgentToken(token, wallet, provider, now)).toEqual({ ok: true });
      expect((await verifyAgentToken(token, wallet, otherProvider, now)).ok).toBe(false);
      expect((await agentOfToken(token, otherProvider, now)).ok).toBe(false);
      expect(
        await verifyAgentToken(token, wallet, provider, now + (AGENT_TOKEN_LIFETIME_S + 1) * 1000),
      ).toMatchObject({ ok: false, reason: /expired/ });
    }
  });
});
