import { randomBytes } from "node:crypto";
import { createServer, type Server } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseProviderHosts } from "../../src/providers/provider-hosts.js";
import { randomWallet } from "../support/fixtures.js";
import {
  createProviderDatabase,
  postProviderRegistration,
  registerPricedProvider,
  startTestGateway,
  type TestGateway,
} from "../support/gateway.js";
import { connectAgent, fundedTestAgent, startTestProxy } from "../support/proxy.js";

let providerDb: Awaited<ReturnType<typeof createProviderDatabase>>;
const gateways: TestGateway[] = [];
const servers: Server[] = [];
beforeAll(async () => {
  providerDb = await createProviderDatabase(5);
});
afterAll(async () => {
  for (const gateway of gateways) await gateway.close();
  for (const server of servers) server.close();
  await providerDb?.drop();
});

async function gatewayWith(options: Parameters<typeof startTestGateway>[0]) {
  const gateway = await startTestGateway(options);
  gateways.push(gateway);
  return gateway;
}

const register = postProviderRegistration;

/** The test database's connection string with another host (and port). */
function at(host: string, port?: number): string {
  const url = new URL(providerDb.url);
  url.hostname = host;
  if (port !== undefined) url.port = String(port);
  return url.toString();
}

/** A TCP server on loopback that does `behave` with each connection; its port. */
async function listen(behave: (socket: import("node:net").Socket) => void): Promise<number> {
  const server = createServer(behave);
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return (server.address() as { port: number }).port;
}

describe("where a provider URL may point (PGTOLL_PROVIDER_HOSTS)", () => {
  it("pgtoll start's default (public) refuses loopback, private, link-local and mapped addresses, and names that resolve there", async () => {
    const gateway = await gatewayWith({ env: { PGTOLL_PROVIDER_HOSTS: "" } });
    for (const [host, address] of [
      ["127.0.0.1", "127.0.0.1"],
      ["localhost", undefined],
      ["10.1.2.3", "10.1.2.3"],
      ["192.168.0.10", "192.168.0.10"],
      ["169.254.169.254", "169.254.169.254"],
      ["[::1]", "::1"],
      ["[::ffff:127.0.0.1]", "::ffff:7f00:1"],
      ["[fd00::1]", "fd00::1"],
    ] as const) {
      const res = await register(gateway, at(host));
      expect(res.statusCode, host).toBe(400);
      expect(res.json().error).toMatch(
        /not an address a provider database may have: loopback, private, link-local and reserved addresses are refused unless PGTOLL_PROVIDER_HOSTS lists them/,
      );
      if (address) expect(res.json().error).toContain(address);
      else expect(res.json().error).toMatch(/the host localhost resolves to (127\.0\.0\.1|::1)/);
    }
  });

  it("a listed network, address or host name is allowed", async () => {
    for (const hosts of ["127.0.0.0/8", "127.0.0.1", "public, localhost"]) {
      const gateway = await gatewayWith({ env: { PGTOLL_PROVIDER_HOSTS: hosts } });
      const host = hosts.includes("localhost") ? "localhost" : "127.0.0.1";
      const res = await register(gateway, at(host));
      expect(res.statusCode, `${hosts}: ${res.body}`).toBe(201);
    }
  });

  it("answers one message for every host it cannot talk PostgreSQL with, whatever the cause", async () => {
    const gateway = await gatewayWith({ env: { PGTOLL_PROVIDER_HOSTS: "any" } });
    const closedPort = await listen(() => {});
    servers.at(-1)!.close(); // nothing listens there any more
    const http = await listen((socket) => socket.end("HTTP/1.1 400 Bad Request\r\n\r\n"));
    const hangsUp = await listen((socket) => socket.destroy());
    const garbage = await listen((socket) => socket.end(randomBytes(64)));
    const answers = new Set<string>();
    for (const [host, port] of [
      ["127.0.0.1", closedPort],
      ["127.0.0.1", http],
      ["127.0.0.1", hangsUp],
      ["127.0.0.1", garbage],
      ["no-such-host.invalid", 5432],
    ] as const) {
      const res = await register(gateway, at(host, port));
      expect(res.statusCode, `${host}:${port}`).toBe(400);
      answers.add(res.json().error.replace(`${host}:${port}`, "HOST"));
    }
    expect([...answers]).toEqual([
      "invalid connectionString: could not connect to a PostgreSQL server at HOST (check the host, the port and that it accepts connections from pgtoll)",
    ]);
    // A PostgreSQL server's own refusal is still told: the provider can fix it.
    const wrong = new URL(providerDb.url);
    wrong.password = "wrong-password-123";
    const refused = await register(gateway, wrong.toString());
    expect(refused.json().error).toMatch(/refused the connection: password authentication failed/);
    expect(refused.json().error).not.toContain("wrong-password-123");
  });

  it("resolves a name once and connects to the address it checked; later connections check again (DNS rebinding)", async () => {
    const answers = ["127.0.0.1", "10.255.255.1"];
    const asked: string[] = [];
    const policy = {
      ...parseProviderHosts("127.0.0.1"),
      resolve: async (host: string) => {
        asked.push(host);
        return [{ address: answers[Math.min(asked.length - 1, 1)]!, family: 4 }];
      },
    };
    const gateway = await gatewayWith({ providerHosts: policy });
    // Registration: one resolution, to the allowed address, and the connection went there (no second look-up).
    const free = { basePricePer1000Rows: 0, markupMultiplier: 1 };
    const { providerId } = await registerPricedProvider(gateway, at("rebind.example"), free);
    expect(asked).toEqual(["rebind.example"]);
    // The name now resolves to a refused address: the gateway's next connection to the provider is refused.
    const res = await gateway.app.inject({
      method: "POST",
      url: "/api/query",
      payload: { sql: "SELECT 1", agentWallet: randomWallet(), providerId },
    });
    expect(res.statusCode, res.body).toBeGreaterThanOrEqual(400);
    // Looked up again for the query (its estimate's connection too), each time to the refused address.
    expect(asked.length).toBeGreaterThanOrEqual(2);
    expect(res.json().error).toMatch(/10\.255\.255\.1, not an address a provider database may have/);
    // And so is the wire proxy's.
    const askedBefore = asked.length;
    const proxy = await startTestProxy(gateway);
    try {
      const agent = await fundedTestAgent(gateway, providerId, 0n);
      const refused = await connectAgent(proxy, agent, providerId).then(
        async (client) => {
          await client.end();
          return null;
        },
        (error: Error) => error,
      );
      expect(refused?.message).toMatch(/10\.255\.255\.1, not an address a provider database may have/);
      expect(asked.length).toBe(askedBefore + 1);
    } finally {
      await proxy.close();
    }
  });
});
