import type pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { UnauthenticatedConnections } from "../../src/proxy/unauthenticated-connections.js";
import type { TestDatabase } from "../support/database.js";
import {
  createProviderDatabase,
  registerPricedProvider,
  startTestGateway,
  type TestGateway,
} from "../support/gateway.js";
import {
  connectAgent,
  fundedTestAgent,
  listenAsSeenFrom,
  startTestProxy,
  type TestAgent,
  type TestProxy,
} from "../support/proxy.js";
import { waitFor } from "../support/real-clients.js";
import { selfSignedContext } from "../support/tls-certificate.js";
import { firstError, WireClient } from "../support/wire-client.js";

/*
 * The caps on connections that have not authenticated: 3 per address, 6 in all. Remote addresses are loopback
 * sockets whose peer address reads as a documentation address (remote clients must use TLS).
 */

let gateway: TestGateway;
let proxy: TestProxy;
let providerDb: TestDatabase;
let providerId: string;
let agent: TestAgent;
const remotes: Awaited<ReturnType<typeof listenAsSeenFrom>>[] = [];

beforeAll(async () => {
  gateway = await startTestGateway();
  proxy = await startTestProxy(gateway, {
    tls: await selfSignedContext(),
    unauthenticated: new UnauthenticatedConnections({ total: 6, perAddress: 3 }),
  });
  providerDb = await createProviderDatabase(10);
  ({ providerId } = await registerPricedProvider(gateway, providerDb.url, {
    basePricePer1000Rows: 0.001,
    markupMultiplier: 1,
  }));
  agent = await fundedTestAgent(gateway, providerId, 1_000_000n);
});
afterAll(async () => {
  for (const remote of remotes) await remote.close();
  await proxy?.close();
  await gateway?.close();
  await providerDb?.drop();
});

async function portSeenFrom(peer: string): Promise<number> {
  const remote = await listenAsSeenFrom(proxy, peer);
  remotes.push(remote);
  return remote.port;
}

/** An agent session over TLS through `port`: served, one query answered. */
async function served(port: number): Promise<pg.Client> {
  const client = await connectAgent({ port }, agent, providerId, { ssl: { rejectUnauthorized: false } });
  expect((await client.query("SELECT count(*)::int AS n FROM items")).rows).toEqual([{ n: 10 }]);
  return client;
}

/** Connections that send nothing: they stay unauthenticated until the startup timeout. */
async function idle(port: number, count: number): Promise<WireClient[]> {
  const clients: WireClient[] = [];
  for (let i = 0; i < count; i++) {
    clients.push(await WireClient.connect(port));
    await waitFor(() => proxy.ctx.unauthenticated.size >= clients.length, 2000, "the proxy to count it");
  }
  return clients;
}

async function closeAll(clients: (WireClient | pg.Client)[]): Promise<void> {
  await Promise.all(clients.map((c) => (c instanceof WireClient ? c.destroy() : c.end())));
  await waitFor(() => proxy.ctx.unauthenticated.size === 0, 5000, "the proxy to forget them");
}

describe("connections that have not authenticated", () => {
  it("one address gets 3 at once: a fourth is refused with 53300 before it sends a byte; other addresses and authenticated sessions do not count", async () => {
    const [capped, other] = [await portSeenFrom("203.0.113.7"), await portSeenFrom("203.0.113.8")];
    // Authenticated sessions from the address are not counted against it.
    const sessions = [await served(capped), await served(capped), await served(capped)];
    const waiting = await idle(capped, 3);
    const refused = await WireClient.connect(capped);
    const answer = await refused.untilClosed();
    expect(answer.map((m) => m.type)).toEqual(["E"]);
    expect(firstError(answer)).toMatchObject({
      severity: "FATAL",
      code: "53300",
      message: "too many connections from 203.0.113.7 are authenticating (at most 3 at once)",
    });
    sessions.push(await served(other), await served(proxy.port));
    // Once one of its connections is gone, the address gets a place again.
    waiting.shift()!.destroy();
    await waitFor(() => proxy.ctx.unauthenticated.size === 2, 2000, "the proxy to forget it");
    sessions.push(await served(capped));
    await closeAll([...waiting, ...sessions]);
  });

  it("6 in all: a new connection closes the one that has waited longest, so an honest client is served", async () => {
    const waiting = await idle(proxy.port, 6);
    const session = await served(proxy.port);
    // The honest client took the place of the first idle one, which the proxy closed without a word.
    expect(await waiting[0]!.untilClosed()).toEqual([]);
    expect(waiting.slice(1).map((c) => c.isClosed)).toEqual([false, false, false, false, false]);
    const { values } = await proxy.ctx.metrics.sessionsRefused.get();
    expect(values.find((v) => v.labels.reason === "evicted")?.value).toBe(1);
    await closeAll([...waiting, session]);
  });
});
