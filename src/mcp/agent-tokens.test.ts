import { generatePrivateKey, privateKeyToAddress } from "viem/accounts";
import { describe, expect, it } from "vitest";
import { verifyAgentToken } from "../proxy/agent-token.js";
import { AgentTokens, TOKEN_RENEW_MARGIN_MS } from "./agent-tokens.js";

const PROVIDER = "55792bf5-7cd0-448b-9eae-6f25e67a053b";

describe("AgentTokens", () => {
  it("keeps one token while it has time left and signs a new one before it expires", async () => {
    const key = generatePrivateKey();
    const wallet = privateKeyToAddress(key);
    let now = Date.UTC(2026, 10, 24, 12, 0, 0);
    const tokens = new AgentTokens(key, PROVIDER, () => now);
    const first = await tokens.current();
    now += 30 * 60_000;
    expect(await tokens.current()).toBe(first);
    // Less than the margin left of its hour: renewed, and the new one is valid well past the old one's end.
    now += 30 * 60_000 - TOKEN_RENEW_MARGIN_MS + 5000;
    const renewed = await tokens.current();
    expect(renewed).not.toBe(first);
    expect(await verifyAgentToken(renewed, wallet, PROVIDER, now + 50 * 60_000)).toEqual({ ok: true });
    expect((await verifyAgentToken(first, wallet, PROVIDER, now + TOKEN_RENEW_MARGIN_MS)).ok).toBe(false);
  });
});
