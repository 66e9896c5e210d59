import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SessionDrain } from "../../src/proxy/session-drain.js";
import { UpstreamSlots } from "../../src/proxy/upstream-slots.js";
import type { TestDatabase } from "../support/database.js";
import {
  createProviderDatabase,
  registerPricedProvider,
  startTestGateway,
  type TestGateway,
} from "../support/gateway.js";
import { connectAgent, fundedTestAgent, startTestProxy } from "../support/proxy.js";

let gateway: TestGateway;
let providerDb: TestDatabase;
let providerId: string;

beforeAll(async () => {
  gateway = await startTestGateway();
  providerDb = await createProviderDatabase(10);
  ({ providerId } = await registerPricedProvider(gateway, providerDb.url));
});
afterAll(async () => {
  await gateway?.close();
  await providerDb?.drop();
});

describe("a stopping proxy whose grace is over", () => {
  it("ends a connection still starting up with FATAL 57P01, as it ends its sessions", async () => {
    // One upstream session for the provider: a second agent's startup waits for it.
    const proxy = await startTestProxy(gateway, {
      slots: new UpstreamSlots(1, 30_000),
      drain: new SessionDrain(),
    });
    const holder = await connectAgent(
      proxy,
      await fundedTestAgent(gateway, providerId, 1_000_000n),
      providerId,
    );
    holder.on("error", () => {});
    // In a transaction block: not idle, so it is ended only when the grace is over.
    await holder.query("BEGIN");
    const waiting = connectAgent(proxy, await fundedTestAgent(gateway, providerId, 1_000_000n), providerId);
    const refused = waiting.then(
      () => undefined,
      (error: { code?: string; message: string }) => error,
    );
    await new Promise((resolve) => setTimeout(resolve, 200));
    const holderEnded = new Promise<{ code?: string }>((resolve) => holder.once("error", resolve));
    await proxy.drain(300);
    expect((await holderEnded).code).toBe("57P01");
    expect(await refused).toMatchObject({
      code: "57P01",
      message: expect.stringContaining("the server is restarting"),
    });
  });
});
