import { describe, expect, it } from "vitest";
import { dialHost } from "./dial-address.js";
import { type DevStackInfo, formatDevInstructions } from "./instructions.js";

const PROVIDER = "55792bf5-7cd0-448b-9eae-6f25e67a053b";
const WALLET = "0x3c44cdddb6a900fa2b585dd299e03d12fa4293bc";

const info: DevStackInfo = {
  httpUrl: "http://0.0.0.0:3000",
  proxyUrl: "postgres://0.0.0.0:6543",
  tls: false,
  rpcUrl: "http://127.0.0.1:8545",
  chainId: 8453,
  tokenAddress: "0x5fbdb2315678afecb367f032d93f642f64180aa3",
  provider: { id: PROVIDER, name: "Airports sample (pgtoll dev)", registered: true, apiKey: "pgt_sample" },
  price: {
    basePricePer1000Rows: 0.05,
    markupMultiplier: 1.2,
    minimumCostPerStatement: 0.0001,
    pricePerMB: 0.05,
  },
  database: "pgtoll_sample",
  tables: [{ table: "airports", rows: 5210 }],
  agent: { wallet: WALLET, privateKey: "0xkey", accountIndex: 2 },
  deposit: { txHash: "0xabc", amountMicro: 10_000_000n, balance: "10.000000" },
  x402Agent: {
    wallet: "0x15d34aaf54267db7d7c367839aaf71a00a2c6a65",
    privateKey: "0xpayer",
    accountIndex: 4,
    onChainMicro: 10_000_000n,
    minTopupMicro: 1_000_000n,
  },
  agentToken: "pgtoll1.1.0xsig",
  tokenLifetimeMinutes: 60,
  cli: "node dist/cli.js",
  mcp: { command: "/usr/bin/node", args: ["/srv/pgtoll/dist/cli.js"] },
  dataDirFlag: " --data-dir '/tmp/my dir'",
};

const lines = (text: string) => text.split("\n").map((line) => line.trim());

describe("formatDevInstructions", () => {
  it("prints the console's address with the sample provider's id and key, dialing loopback", () => {
    const text = lines(formatDevInstructions(info));
    expect(text).toContain(`http://127.0.0.1:3000/console#provider=${PROVIDER}`);
    expect(text).toContain(`provider id  ${PROVIDER}`);
    expect(text.find((line) => line.startsWith("API key "))).toMatch(/^API key\s+pgt_sample\s/);
  });

  it("prints the mcpServers block for the demo agent with absolute paths, dialing loopback", () => {
    const text = formatDevInstructions(info);
    const start = text.indexOf('{\n    "mcpServers"');
    const block = text.slice(start, text.indexOf("\n\n", start));
    const config = JSON.parse(block) as {
      mcpServers: { pgtoll: { command: string; args: string[]; env: Record<string, string> } };
    };
    expect(config.mcpServers.pgtoll).toEqual({
      command: "/usr/bin/node",
      args: [
        "/srv/pgtoll/dist/cli.js",
        "mcp",
        "--provider",
        PROVIDER,
        "--url",
        "http://127.0.0.1:3000",
        "--proxy",
        "postgres://127.0.0.1:6543",
      ],
      env: {
        PGTOLL_AGENT_KEY: "0xkey",
        PGTOLL_MCP_ALLOW_DEPOSIT: "on",
        PGTOLL_MCP_DEPOSIT_MAX: "10",
        PGTOLL_RPC_URL: "http://127.0.0.1:8545",
        PGTOLL_CHAIN_ID: "8453",
        PGTOLL_TOKEN_ADDRESS: "0x5fbdb2315678afecb367f032d93f642f64180aa3",
      },
    });
  });

  it("prints a psql line for the proxy, dialing loopback when pgtoll listens on all addresses", () => {
    expect(lines(formatDevInstructions(info))).toContain(
      `PGPASSWORD=pgtoll1.1.0xsig psql "host=127.0.0.1 port=6543 user=${WALLET} dbname=${PROVIDER} sslmode=disable"`,
    );
    expect(formatDevInstructions({ ...info, tls: true })).toContain("sslmode=require");
  });

  it("names the dev certificate and a verify-full psql line that trusts it, only when pgtoll dev made one", () => {
    expect(formatDevInstructions({ ...info, tls: true })).not.toContain("PGSSLROOTCERT");
    const text = formatDevInstructions({
      ...info,
      tls: true,
      tlsRootCert: {
        file: "/tmp/my dir/tls/dev-proxy.crt",
        names: ["localhost", "*.localhost", "127.0.0.1"],
      },
    });
    expect(text).toContain("self-signed by pgtoll dev for localhost, *.localhost, 127.0.0.1");
    expect(lines(text)).toContainEqual(
      expect.stringMatching(
        new RegExp(
          `^PGSSLROOTCERT='/tmp/my dir/tls/dev-proxy\\.crt' PGPASSWORD=\\$\\(.+\\) psql "host=127\\.0\\.0\\.1 port=6543 user=${WALLET} dbname=${PROVIDER} sslmode=verify-full"$`,
        ),
      ),
    );
    expect(text).toContain('PGHOSTADDR=127.0.0.1 PGPORT=6543 psql "$(npx neonctl connection-string');
  });

  it("states every dimension of the price, and what 1000 rows cost by the cost rule", () => {
    const text = formatDevInstructions(info);
    expect(text).toContain("0.060000 per 1000 rows; minimum 0.000100 per statement; 0.060000 per MB");
    // 1000 x 60 micro-USDC for the rows, 50 000 bytes x 0.06 micro-USDC for the bytes.
    expect(text).toContain("1000 rows of 50 bytes cost 0.063000 USDC");
  });

  it("prints a budget example of each kind", () => {
    const text = formatDevInstructions(info);
    expect(text).toContain('"maxCost":"0.02"');
    expect(text).toContain("SET pgtoll.max_session_cost = '0.05'");
    const put = lines(text).find((line) => line.includes("-X PUT"));
    expect(put).toContain(`/api/agents/${WALLET}/limits/${PROVIDER} -H "Authorization: Bearer $TOKEN"`);
    // One line, as pasted into a shell: curl's -w '\n' is written escaped, not as a line break.
    expect(put).toMatch(/^TOKEN=\$\(.*\) && curl -s -w '\\n' -X PUT /);
    expect(put).toMatch(/"dailyLimit":"1"}'$/);
  });

  it("says what the x402 agent pays: the minimum top-up", () => {
    expect(formatDevInstructions(info)).toContain("It pays the minimum top-up, 1.000000 USDC");
  });

  it("makes the deposit line send a transfer with the data directory, and curl carry a token only in signature mode", () => {
    const text = formatDevInstructions(info);
    const deposit = lines(text).find((line) => line.includes("/api/deposit"));
    expect(deposit).toBe(
      `curl -s -w '\\n' http://127.0.0.1:3000/api/deposit -H 'Content-Type: application/json' -d '{"txHash":"'$(node dist/cli.js dev-transfer --amount 5 --data-dir '/tmp/my dir')'","agentWallet":"${WALLET}","providerId":"${PROVIDER}"}'`,
    );
    // Only the daily limit's line carries a token (its own): only the agent may set its limits.
    expect(lines(text).filter((line) => line.includes("Authorization"))).toEqual([
      expect.stringContaining("/limits/"),
    ]);
    const signed = formatDevInstructions({ ...info, restBearer: "pgtoll1.2.0xsig" });
    const curls = lines(signed).filter((line) => line.startsWith("curl "));
    expect(curls).toHaveLength(6);
    for (const curl of curls) expect(curl).toContain("-H 'Authorization: Bearer pgtoll1.2.0xsig'");
  });
});

describe("dialHost", () => {
  it.each([
    ["0.0.0.0", "127.0.0.1"],
    ["[::]", "::1"],
    ["[::1]", "::1"],
    ["10.0.0.5", "10.0.0.5"],
  ])("%s -> %s", (host, dialed) => {
    expect(dialHost(host)).toBe(dialed);
  });
});
