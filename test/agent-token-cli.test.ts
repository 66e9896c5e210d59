import { privateKeyToAddress } from "viem/accounts";
import { describe, expect, it } from "vitest";
import { verifyAgentToken } from "../src/proxy/agent-token.js";
import { runCli } from "./support/cli.js";

const KEY = "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d";
const WALLET = privateKeyToAddress(KEY).toLowerCase();
const PROVIDER = "0b6f4a52-8d2e-4c1b-9a57-3f1c2d4e5a6b";

async function agentToken(args: string[], key: string | undefined) {
  const cli = runCli(["agent-token", ...args], { PGTOLL_AGENT_KEY: key });
  const code = await cli.exited;
  return { code, stdout: cli.stdout(), stderr: cli.stderr() };
}

describe.concurrent("pgtoll agent-token", () => {
  it("prints one line, a token of the key's wallet for the provider", async () => {
    const { code, stdout, stderr } = await agentToken(["--provider", PROVIDER.toUpperCase()], KEY);
    expect(stderr).toBe("");
    expect(code).toBe(0);
    expect(stdout).toMatch(/^pgtoll1\.\d+\.0x[0-9a-f]{40}\.0x[0-9a-f]{130}\n$/);
    expect(await verifyAgentToken(stdout.trim(), WALLET, PROVIDER)).toEqual({ ok: true });
  });

  it("prints a connection URL for a proxy with --url", async () => {
    const { code, stdout } = await agentToken(
      ["--provider", PROVIDER, "--url", "postgres://127.0.0.1:6543"],
      KEY,
    );
    expect(code).toBe(0);
    const url = new URL(stdout.trim());
    expect([url.protocol, url.hostname, url.port, url.username, url.pathname]).toEqual([
      "postgres:",
      "127.0.0.1",
      "6543",
      WALLET,
      `/${PROVIDER}`,
    ]);
    expect(await verifyAgentToken(decodeURIComponent(url.password), WALLET, PROVIDER)).toEqual({ ok: true });
  });

  it.each([
    [undefined, /PGTOLL_AGENT_KEY is not set/],
    ["0x1234", /PGTOLL_AGENT_KEY must be a private key: 0x followed by 64 hex digits/],
  ])("refuses a missing or malformed key (%s), naming the variable", async (key, message) => {
    const { code, stdout, stderr } = await agentToken(["--provider", PROVIDER], key);
    expect(code).toBe(2);
    expect(stdout).toBe("");
    expect(stderr).toMatch(message);
    if (key) expect(stderr).not.toContain(key);
  });
});
