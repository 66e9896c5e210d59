import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { getBalance } from "../../src/billing/ledger.js";
import type { TestGateway } from "../support/gateway.js";
import {
  fundedTestAgent,
  type ProxiedProvider,
  startProxiedProvider,
  startTestProxy,
  type TestAgent,
  type TestProxy,
} from "../support/proxy.js";

let provider: ProxiedProvider;
let gateway: TestGateway;
let proxy: TestProxy;
let providerId: string;

beforeAll(async () => {
  provider = await startProxiedProvider();
  ({ gateway, proxy, providerId } = provider);
});
afterAll(() => provider?.close());

/** node-postgres connected to the proxy through an in-process socket, as `agent`. */
async function inProcessClient(agent: TestAgent, password?: string): Promise<pg.Client> {
  const client = new pg.Client({
    stream: () => proxy.connectInProcess(),
    user: agent.wallet,
    database: providerId,
    password: password ?? (await agent.token()),
  });
  await client.connect();
  return client;
}

describe("a connection to the proxy from within the process", () => {
  it("is an agent session like any other: authenticated, guarded, metered and charged", async () => {
    const agent = await fundedTestAgent(gateway, providerId, 1_000_000n);
    const client = await inProcessClient(agent);
    try {
      const { rows } = await client.query("SELECT id FROM items WHERE id <= $1 ORDER BY id", [3]);
      expect(rows).toEqual([{ id: 1 }, { id: 2 }, { id: 3 }]);
      await expect(client.query("SELECT pg_sleep(0) FROM pg_shadow")).rejects.toMatchObject({
        code: "42501",
      });
      expect((await client.query("SHOW pgtoll.balance")).rows[0]["pgtoll.balance"]).toBe("0.997000");
    } finally {
      await client.end();
    }
    expect((await getBalance(gateway.ctx.db, agent.wallet, providerId)).balanceMicro).toBe(997_000n);
    await expect(inProcessClient(agent, "not-a-token")).rejects.toMatchObject({ code: "28P01" });
  });

  it("serves an agent pgtoll already authenticated without a password, and that agent alone", async () => {
    const agent = await fundedTestAgent(gateway, providerId, 1_000_000n);
    const other = await fundedTestAgent(gateway, providerId, 1_000_000n);
    const authenticated = { wallet: agent.wallet, providerId };
    // No password: the client would fail if the proxy asked for one.
    const connectAs = (wallet: string, database = providerId) =>
      new pg.Client({ stream: () => proxy.connectInProcess(authenticated), user: wallet, database });
    const client = connectAs(agent.wallet.toUpperCase().replace("0X", "0x"));
    await client.connect();
    try {
      const { rows } = await client.query("SELECT id FROM items WHERE id <= 2 ORDER BY id");
      expect(rows).toEqual([{ id: 1 }, { id: 2 }]);
      await expect(client.query("SELECT usename FROM pg_shadow")).rejects.toMatchObject({ code: "42501" });
      expect((await client.query("SHOW pgtoll.balance")).rows[0]["pgtoll.balance"]).toBe("0.998000");
    } finally {
      await client.end();
    }

    // Another wallet, or another provider, on the same connection is refused before anything runs.
    await expect(connectAs(other.wallet).connect()).rejects.toMatchObject({
      code: "28000",
      message: expect.stringContaining(`not wallet ${other.wallet.toLowerCase()}`),
    });
    const elsewhere = "00000000-0000-4000-8000-000000000000";
    await expect(connectAs(agent.wallet, elsewhere).connect()).rejects.toMatchObject({ code: "28000" });
    expect((await getBalance(gateway.ctx.db, other.wallet, providerId)).balanceMicro).toBe(1_000_000n);
    // Without the caller's word, the same startup still needs the agent's token.
    const unproven = new pg.Client({
      stream: () => proxy.connectInProcess(),
      user: agent.wallet,
      database: providerId,
      password: "",
    });
    await expect(unproven.connect()).rejects.toThrow();
  });

  it("carries a large result with backpressure to a client that reads slowly, every row charged", async () => {
    const agent = await fundedTestAgent(gateway, providerId, 100_000_000n);
    const client = await inProcessClient(agent);
    try {
      const socket = (client as unknown as { connection: { stream: NodeJS.ReadableStream } }).connection
        .stream;
      const result = client.query("SELECT repeat('x', 1000) AS v FROM generate_series(1, 20000)");
      socket.pause();
      await new Promise((resolve) => setTimeout(resolve, 200));
      socket.resume();
      expect((await result).rowCount).toBe(20_000);
      expect((await client.query("SHOW pgtoll.session_cost")).rows[0]["pgtoll.session_cost"]).toBe(
        "20.000000",
      );
    } finally {
      await client.end();
    }
  });

  it("is ended with the proxy's other sessions when the proxy closes", async () => {
    const other = await startTestProxy(gateway, { metrics: proxy.ctx.metrics });
    const agent = await fundedTestAgent(gateway, providerId, 1_000_000n);
    const client = new pg.Client({
      stream: () => other.connectInProcess(),
      user: agent.wallet,
      database: providerId,
      password: await agent.token(),
    });
    await client.connect();
    const ended = new Promise<void>((resolve) => client.once("end", () => resolve()));
    client.on("error", () => {});
    await client.query("SELECT 1");
    await other.close();
    await ended;
    await expect(client.query("SELECT 1")).rejects.toThrow();
  });
});
