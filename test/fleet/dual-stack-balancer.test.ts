import { existsSync } from "node:fs";
import type { Socket } from "node:net";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { addressMatcher } from "../../src/proxy/trusted-proxies.js";
import type { TestDatabase } from "../support/database.js";
import { socketFrom, startDualStackHaproxy } from "../support/fleet.js";
import {
  createProviderDatabase,
  registerPricedProvider,
  startTestGateway,
  type TestGateway,
} from "../support/gateway.js";
import { fundedTestAgent, startTestProxy, type TestProxy } from "../support/proxy.js";
import { waitFor } from "../support/real-clients.js";

/*
 * HAProxy on a dual-stack socket (`bind :::port v4v6`) gives IPv4 clients in its PROXY v2 header as IPv4-mapped
 * IPv6 addresses. Each is still its own client for the per-address session cap.
 */

const HAPROXY = "/usr/sbin/haproxy";
const PER_ADDRESS = 2;

let gateway: TestGateway;
let proxy: TestProxy;
let haproxy: Awaited<ReturnType<typeof startDualStackHaproxy>>;
let providerDb: TestDatabase;
let providerId: string;

beforeAll(async () => {
  if (!existsSync(HAPROXY)) return;
  gateway = await startTestGateway();
  proxy = await startTestProxy(gateway, {
    proxyProtocol: { trusted: addressMatcher(["127.0.0.1", "::1"]), required: true },
    sessionsPerAddress: PER_ADDRESS,
    // Loopback addresses stand for remote clients here.
    exemptFromAddressLimit: () => false,
  });
  haproxy = await startDualStackHaproxy(proxy.port);
  providerDb = await createProviderDatabase(5);
  ({ providerId } = await registerPricedProvider(gateway, providerDb.url));
});
afterAll(async () => {
  await haproxy?.stop();
  await proxy?.close();
  await gateway?.close();
  await providerDb?.drop();
});

/** A connection from `from` to HAProxy that says nothing, held open. */
async function idleConnection(from: string): Promise<Socket> {
  const socket = socketFrom(from);
  await new Promise<void>((resolve, reject) => {
    socket.once("error", reject);
    socket.once("connect", () => resolve());
    socket.connect(haproxy.port, "127.0.0.1");
  });
  socket.on("error", () => {});
  return socket;
}

describe.skipIf(!existsSync(HAPROXY))("IPv4 clients behind a dual-stack HAProxy", () => {
  it("each count as their own address: one client's idle connections do not refuse another", async () => {
    const agent = await fundedTestAgent(gateway, providerId, 1_000_000n);
    const idle = [await idleConnection("127.0.0.1"), await idleConnection("127.0.0.1")];
    const query = async (from: string) => {
      const client = new pg.Client({
        host: "127.0.0.1",
        port: haproxy.port,
        user: agent.wallet,
        database: providerId,
        password: await agent.token(),
        stream: () => socketFrom(from),
      });
      client.on("error", () => {});
      try {
        await client.connect();
        return (await client.query("SELECT 1 AS ok")).rows[0];
      } finally {
        await client.end().catch(() => {});
      }
    };
    try {
      // Both idle connections have reached the proxy and hold their places.
      await waitFor(
        async () => proxy.ctx.metrics !== undefined && idle.every((s) => !s.destroyed),
        2_000,
        "idle",
      );
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(await query("127.0.0.2")).toEqual({ ok: 1 });
      // The first client is still held to its own cap.
      await expect(query("127.0.0.1")).rejects.toMatchObject({ code: "53300" });
    } finally {
      for (const socket of idle) socket.destroy();
    }
  });
});
