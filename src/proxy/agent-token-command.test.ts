import { describe, expect, it } from "vitest";
import { UsageError } from "../command-flags.js";
import { verifyAgentToken } from "./agent-token.js";
import { agentConnectionUrl, agentTokenCommand, readAgentKey } from "./agent-token-command.js";

const KEY = "0x5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a";
const WALLET = "0x3c44cdddb6a900fa2b585dd299e03d12fa4293bc";
const PROVIDER = "55792bf5-7cd0-448b-9eae-6f25e67a053b";

describe("agentTokenCommand", () => {
  it("signs for the provider id in lower case, at the given time", async () => {
    const now = Date.UTC(2030, 0, 1);
    const token = await agentTokenCommand(
      ["--provider", PROVIDER.toUpperCase()],
      { PGTOLL_AGENT_KEY: KEY },
      now,
    );
    expect(token.split(".")[1]).toBe(String(now / 1000));
    expect(await verifyAgentToken(token, WALLET, PROVIDER, now)).toEqual({ ok: true });
  });

  it.each([
    [[], /--provider is required/],
    [["--provider"], /--provider needs a value/],
    [["--provider", "acme"], /--provider must be a provider id \(a UUID\), got "acme"/],
    [["--provider", PROVIDER, "extra"], /unexpected argument "extra"/],
    [["--provider", PROVIDER, "--url", "http://x:1"], /--url must start with postgres:\/\//],
  ])("refuses %j with a usage error", async (argv, message) => {
    const run = agentTokenCommand(argv, { PGTOLL_AGENT_KEY: KEY });
    await expect(run).rejects.toThrow(UsageError);
    await expect(run).rejects.toThrow(message);
  });
});

describe("readAgentKey", () => {
  it("accepts 0x and 64 hex digits, trimmed", () => {
    expect(readAgentKey({ PGTOLL_AGENT_KEY: ` ${KEY}\n` })).toBe(KEY);
  });

  it.each([undefined, "", KEY.slice(2), `${KEY}00`, KEY.replace("5d", "zz")])("refuses %j", (value) => {
    expect(() => readAgentKey({ PGTOLL_AGENT_KEY: value })).toThrow(/PGTOLL_AGENT_KEY/);
  });
});

describe("agentConnectionUrl", () => {
  it("puts wallet, token and provider into the proxy URL", () => {
    expect(agentConnectionUrl("postgresql://[::1]:6543", WALLET, "pgtoll1.1.0xab", PROVIDER)).toBe(
      `postgresql://${WALLET}:pgtoll1.1.0xab@[::1]:6543/${PROVIDER}`,
    );
  });
});
