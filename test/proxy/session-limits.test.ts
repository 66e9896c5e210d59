import type pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { UpstreamSlots } from "../../src/proxy/upstream-slots.js";
import type { OwnedTestDatabase } from "../support/database.js";
import {
  createProviderDatabase,
  registerPricedProvider,
  startTestGateway,
  type TestGateway,
} from "../support/gateway.js";
import { connectAgent, fundedTestAgent, startTestProxy, type TestProxy } from "../support/proxy.js";
import { runProcess } from "../support/real-clients.js";

let gateway: TestGateway;
let providerDb: OwnedTestDatabase;
let priced: string;
let free: string;
const proxies: TestProxy[] = [];
const clients: pg.Client[] = [];

beforeAll(async () => {
  gateway = await startTestGateway();
  providerDb = await createProviderDatabase(10);
  ({ providerId: priced } = await registerPricedProvider(gateway, providerDb.url));
  ({ providerId: free } = await registerPricedProvider(gateway, providerDb.url, {
    basePricePer1000Rows: 0,
    markupMultiplier: 1,
  }));
});
afterAll(async () => {
  await Promise.all(clients.map((client) => client.end().catch(() => {})));
  for (const proxy of proxies) await proxy.close();
  await gateway?.close();
  await providerDb?.drop();
});

async function proxyWith(overrides: Parameters<typeof startTestProxy>[1]): Promise<TestProxy> {
  // Each proxy of one gateway registers its metrics once: the first one's are shared.
  const proxy = await startTestProxy(gateway, {
    ...(proxies[0] ? { metrics: proxies[0].ctx.metrics } : {}),
    ...overrides,
  });
  proxies.push(proxy);
  return proxy;
}

async function open(proxy: TestProxy, providerId: string, funds: bigint): Promise<pg.Client> {
  const client = await connectAgent(proxy, await fundedTestAgent(gateway, providerId, funds), providerId);
  clients.push(client);
  return client;
}

const refusal = (proxy: TestProxy, providerId: string, funds: bigint) =>
  open(proxy, providerId, funds).then(
    () => null,
    (error: { code?: string; message: string }) => ({ code: error.code, message: error.message }),
  );

describe("wire-proxy sessions per client address and in total", () => {
  it("refuses a connection beyond the limit per address with 53300, and takes one again once a session ends", async () => {
    const proxy = await proxyWith({ sessionsPerAddress: 2, exemptFromAddressLimit: () => false });
    const [first] = [await open(proxy, priced, 1_000_000n), await open(proxy, priced, 1_000_000n)];
    expect(await refusal(proxy, priced, 1_000_000n)).toEqual({
      code: "53300",
      message: "too many connections from this address: at most 2 (PGTOLL_PROXY_SESSIONS_PER_IP)",
    });
    clients.splice(clients.indexOf(first!), 1);
    await first!.end();
    await expect.poll(() => refusal(proxy, priced, 1_000_000n)).toBeNull();
  });

  it("does not limit this host's own addresses per address (the remote MCP endpoint's sessions)", async () => {
    const proxy = await proxyWith({ sessionsPerAddress: 1 });
    await open(proxy, priced, 1_000_000n);
    expect(await refusal(proxy, priced, 1_000_000n)).toBeNull();
  });

  it("refuses a connection beyond the total with 53300 naming the limit", async () => {
    const proxy = await proxyWith({ maxConnections: 2 });
    await open(proxy, priced, 1_000_000n);
    await open(proxy, priced, 1_000_000n);
    expect(await refusal(proxy, priced, 1_000_000n)).toEqual({
      code: "53300",
      message: "too many connections to pgtoll's wire proxy: at most 2 (PGTOLL_PROXY_MAX_CONNECTIONS)",
    });
  });
});

describe("psql shows why its session was refused", () => {
  const psql = async (proxy: TestProxy, funds: bigint, sslmode: string) => {
    const agent = await fundedTestAgent(gateway, priced, funds);
    const env = {
      PGPASSWORD: await agent.token(),
      PGHOST: "127.0.0.1",
      PGPORT: String(proxy.port),
      PGUSER: agent.wallet,
      PGDATABASE: priced,
      PGSSLMODE: sslmode,
      PGCONNECT_TIMEOUT: "5",
    };
    return (await runProcess("/usr/bin/psql", ["-X", "-c", "SELECT 1"], { env })).stderr;
  };

  it("the limit it reached, even when it asked for TLS first, and how to fund an agent without funds", async () => {
    const proxy = await proxyWith({ sessionsPerAddress: 1, exemptFromAddressLimit: () => false });
    await open(proxy, priced, 1_000_000n);
    for (const sslmode of ["prefer", "disable"])
      expect(await psql(proxy, 1_000_000n, sslmode)).toContain(
        "FATAL:  too many connections from this address: at most 1 (PGTOLL_PROXY_SESSIONS_PER_IP)",
      );
    const anyAddress = await proxyWith({});
    const refused = await psql(anyAddress, 0n, "prefer");
    expect(refused).toContain(`FATAL:  insufficient funds: 0.000000 USDC available with provider ${priced}`);
    expect(refused).toContain("HINT:  fund it first: the provider's wallet is 0x");
  });
});

describe("a provider that charges nothing", () => {
  it("serves agents without funds, but never in the share of upstream sessions kept for funded agents", async () => {
    const proxy = await proxyWith({ slots: new UpstreamSlots(4, 500, 1) });
    for (let i = 0; i < 3; i++) await open(proxy, free, 0n);
    expect(await refusal(proxy, free, 0n)).toEqual({
      code: "53300",
      message:
        "the 3 upstream sessions of this provider open to sessions that pay nothing are busy; waited 500 ms",
    });
    // An agent with a deposit with this provider takes the kept slot at once.
    const funded = await open(proxy, free, 1n);
    expect((await funded.query("SELECT count(*)::int AS n FROM items")).rows).toEqual([{ n: 10 }]);
    expect(proxy.ctx.slots.inUse(free)).toBe(4);
  });
});
