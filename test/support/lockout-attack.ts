/**
 * Wallets with no deposit hammering one provider of a running pgtoll, in a process of their own (so that the
 * measuring test's event loop is not theirs): each wallet keeps an MCP session open through `/mcp` and calls
 * the free `balance` tool, and keeps trying to hold a wire-proxy session; a refused attempt is tried again after
 * `retryMs` (with jitter, as independent clients would). Prints `ready` once every wallet has tried both, and a
 * JSON line of counts when it gets SIGTERM.
 *
 * Usage: tsx lockout-attack.ts '{"httpUrl","proxyPort","providerId","wallets","retryMs","addresses":[...]}'
 */
import pg from "pg";
import { generatePrivateKey, privateKeyToAddress } from "viem/accounts";
import { createAgentToken } from "../../src/proxy/agent-token.js";
import { remoteMcpClient } from "./mcp-clients.js";

const { httpUrl, proxyPort, providerId, wallets, retryMs, addresses } = JSON.parse(
  process.argv[2] ?? "{}",
) as {
  httpUrl: string;
  proxyPort: number;
  providerId: string;
  wallets: number;
  retryMs: number;
  addresses: string[];
};

const counts = {
  wireHeld: 0,
  wireRefused: {} as Record<string, number>,
  mcpHeld: 0,
  mcpRefused: 0,
  balanceCalls: 0,
};
const open: { close(): Promise<unknown> }[] = [];
let stopping = false;
const pause = () => new Promise((resolve) => setTimeout(resolve, retryMs * (0.5 + Math.random())));

async function wire(wallet: string, token: string): Promise<void> {
  while (!stopping) {
    const client = new pg.Client({
      host: "127.0.0.1",
      port: proxyPort,
      user: wallet,
      database: providerId,
      password: token,
      application_name: "attacker",
    });
    client.on("error", () => {});
    try {
      await client.connect();
      counts.wireHeld++;
      open.push({ close: () => client.end() });
      return;
    } catch (error) {
      const code = (error as { code?: string }).code ?? "other";
      counts.wireRefused[code] = (counts.wireRefused[code] ?? 0) + 1;
      await pause();
    }
  }
}

async function mcp(address: string, token: string, tried: () => void): Promise<void> {
  let first = true;
  while (!stopping) {
    try {
      const { client } = await remoteMcpClient(httpUrl, providerId, token, address);
      counts.mcpHeld++;
      open.push(client);
      if (first) tried();
      first = false;
      while (!stopping) {
        await client.callTool({ name: "balance", arguments: {} });
        counts.balanceCalls++;
        await pause();
      }
      return;
    } catch {
      counts.mcpRefused++;
      if (first) tried();
      first = false;
      await pause();
    }
  }
}

let waiting = wallets;
const tried = () => {
  if (--waiting === 0) console.log("ready");
};
const attackers = Array.from({ length: wallets }, async (_, i) => {
  const key = generatePrivateKey();
  const wallet = privateKeyToAddress(key).toLowerCase();
  const token = await createAgentToken(key, providerId);
  await Promise.all([wire(wallet, token), mcp(addresses[i % addresses.length]!, token, tried)]);
});

process.on("SIGTERM", async () => {
  stopping = true;
  await Promise.allSettled(open.map((client) => client.close()));
  console.log(JSON.stringify(counts));
  process.exit(0);
});
await Promise.all(attackers);
