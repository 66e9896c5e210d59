import { Socket } from "node:net";
import pg from "pg";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { costOfRows, priceOf } from "../../src/billing/cost.js";
import { getBalance, listLedgerEntries } from "../../src/billing/ledger.js";
import { FrontendCode, StartupCode } from "../../src/proxy/message-codes.js";
import { startProxyServer } from "../../src/proxy/proxy-server.js";
import {
  encodeFrame,
  encodeQuery,
  encodeStartupMessage,
  encodeSync,
  encodeTerminate,
} from "../../src/proxy/serializer.js";
import { UpstreamSlots } from "../../src/proxy/upstream-slots.js";
import type { TestDatabase } from "../support/database.js";
import {
  createProviderDatabase,
  registerPricedProvider,
  startTestGateway,
  type TestGateway,
} from "../support/gateway.js";
import { fundedTestAgent, startTestProxy, type TestAgent, type TestProxy } from "../support/proxy.js";
import {
  commandTags,
  firstColumn,
  firstError,
  frontend,
  startupPacket,
  WireClient,
} from "../support/wire-client.js";

/*
 * The proxy against clients that misbehave: every case talks raw bytes over TCP, and after each one the proxy
 * must still serve a healthy session and hold no upstream connection, slot or reservation for the bad client.
 */

const RAW_APP = "robust-raw";
const HEALTHY_APP = "robust-healthy";
const price = priceOf({ priceMicroPer1000Rows: 1000n, markupPpm: 1_000_000n }); // 1 micro-USDC a row
const BIG_RESULT = "SELECT g FROM generate_series(1, 2000000) g";
/** About 70 MB in 300000 rows. */
const WIDE_RESULT = "SELECT g, repeat('x', 200) AS pad FROM generate_series(1, 300000) g";

let gateway: TestGateway;
let proxy: TestProxy;
let providerDb: TestDatabase;
let providerId: string;
let observer: pg.Client;
let healthy: pg.Client;
let healthyAgent: TestAgent;
let rawAgent: TestAgent;
let rawToken: string;

beforeAll(async () => {
  gateway = await startTestGateway();
  // A generous statement timeout: a result held up by a slow client counts against it.
  proxy = await startTestProxy(gateway, { startupTimeoutMs: 3000, statementTimeoutMs: 30_000 });
  providerDb = await createProviderDatabase(300);
  ({ providerId } = await registerPricedProvider(gateway, providerDb.url, {
    basePricePer1000Rows: 0.001,
    markupMultiplier: 1,
  }));
  observer = new pg.Client({ connectionString: providerDb.url, application_name: "robust-observer" });
  await observer.connect();
  healthyAgent = await fundedTestAgent(gateway, providerId, 10_000_000n);
  rawAgent = await fundedTestAgent(gateway, providerId, 100_000_000n);
  rawToken = await rawAgent.token();
  healthy = await connectHealthy();
});
afterAll(async () => {
  await healthy?.end();
  await observer?.end();
  await proxy?.close();
  await gateway?.close();
  await providerDb?.drop();
});

// Every case ends with the proof that it harmed nobody.
afterEach(async () => {
  await expectHealthy();
  await expectNoLeaks();
});

async function connectHealthy(): Promise<pg.Client> {
  const client = new pg.Client({
    host: "127.0.0.1",
    port: proxy.port,
    user: healthyAgent.wallet,
    database: providerId,
    password: await healthyAgent.token(),
    application_name: HEALTHY_APP,
  });
  await client.connect();
  return client;
}

/** The long-lived session and a new one both get correct answers, simple and extended. */
async function expectHealthy(): Promise<void> {
  expect((await healthy.query("SELECT count(*)::int AS n FROM items")).rows).toEqual([{ n: 300 }]);
  const fresh = await connectHealthy();
  try {
    expect((await fresh.query("SELECT name FROM items WHERE id = $1", [42])).rows).toEqual([
      { name: "item 42" },
    ]);
  } finally {
    await fresh.end();
  }
}

async function rawUpstreams(): Promise<number> {
  const { rows } = await observer.query<{ n: number }>(
    "SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = $1 AND application_name = $2",
    [providerDb.name, RAW_APP],
  );
  return rows[0]!.n;
}

async function eventually(check: () => Promise<void>, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      return await check();
    } catch (error) {
      if (Date.now() > deadline) throw error;
      await new Promise((r) => setTimeout(r, 50));
    }
  }
}

/** No upstream session, slot or reservation of the bad clients outlives them (the healthy session keeps one slot). */
async function expectNoLeaks(timeoutMs = 5000): Promise<void> {
  await eventually(async () => {
    expect(await rawUpstreams()).toBe(0);
    expect(proxy.ctx.slots.inUse(providerId)).toBe(1);
    expect(proxy.ctx.slots.waiting(providerId)).toBe(0);
    await Promise.all(proxy.ctx.releases);
    expect((await getBalance(gateway.ctx.db, rawAgent.wallet, providerId)).reservedMicro).toBe(0n);
  }, timeoutMs);
}

function rawParams(extra: Record<string, string> = {}): Record<string, string> {
  return { user: rawAgent.wallet, database: providerId, application_name: RAW_APP, ...extra };
}

async function rawSession(): Promise<WireClient> {
  const client = await WireClient.connect(proxy.port);
  await client.login(rawParams(), rawToken);
  return client;
}

/** The connection is closed by the proxy after at most one ErrorResponse with `code`. */
async function expectRefused(client: WireClient, code: string, message?: RegExp): Promise<void> {
  const messages = await client.untilClosed();
  expect(messages.map((m) => m.type)).toEqual(["E"]);
  expect(firstError(messages)).toMatchObject({
    code,
    ...(message ? { message: expect.stringMatching(message) } : {}),
  });
  expect(client.malformed).toBeUndefined();
}

/** The proxy closed the connection without sending a single byte. */
async function expectClosedSilently(client: WireClient): Promise<void> {
  expect(await client.untilClosed()).toEqual([]);
  expect(client.bytesReceived).toBe(0);
}

async function expectUsable(client: WireClient): Promise<void> {
  const answer = await client.query("SELECT id FROM items WHERE id <= 3 ORDER BY id");
  expect(firstColumn(answer)).toEqual(["1", "2", "3"]);
  expect(client.malformed).toBeUndefined();
}

/** The proxy's end of a client's TCP connection (found among the process's open handles). */
function proxySideOf(client: WireClient): Socket {
  const handles = (process as unknown as { _getActiveHandles(): unknown[] })._getActiveHandles();
  const found = handles.find(
    (h): h is Socket =>
      h instanceof Socket && h.localPort === proxy.port && h.remotePort === client.socket.localPort,
  );
  if (!found) throw new Error("the proxy's socket for this client was not found");
  return found;
}

/** Bytes the proxy has read from upstream sessions. */
async function relayedFromUpstream(): Promise<number> {
  const { values } = await proxy.ctx.metrics.bytesRelayed.get();
  return values.find((v) => v.labels.direction === "upstream_to_client")?.value ?? 0;
}

async function balanceOf(agent: TestAgent): Promise<bigint> {
  await Promise.all(proxy.ctx.releases);
  await proxy.ctx.chargeWriter.flush();
  return (await getBalance(gateway.ctx.db, agent.wallet, providerId)).balanceMicro;
}

describe("startup phase", () => {
  // PostgreSQL only logs a startup packet it cannot frame, and closes: a client that sent one hears nothing.
  it("closes without a word on garbage instead of a startup packet, as PostgreSQL does", async () => {
    for (const garbage of [
      Buffer.from("GET / HTTP/1.1\r\nHost: example\r\n\r\n"),
      Buffer.from([0xff, 0xff, 0xff, 0xff, 1, 2, 3, 4]),
    ]) {
      const client = await WireClient.connect(proxy.port);
      client.send(garbage);
      await expectClosedSilently(client);
    }
  });

  // node-postgres writes Terminate as soon as end() is called, before its startup packet when still connecting.
  it("closes without a word on a Terminate before the startup packet", async () => {
    for (const rest of [Buffer.alloc(0), encodeStartupMessage(rawParams())]) {
      const client = await WireClient.connect(proxy.port);
      client.send(encodeTerminate(), rest);
      await expectClosedSilently(client);
    }
  });

  it("closes without a word when garbage comes before a valid startup packet", async () => {
    const client = await WireClient.connect(proxy.port);
    client.send(Buffer.from("\x13\x37"), encodeStartupMessage(rawParams()));
    await expectClosedSilently(client);
  });

  it.each([0, 3, 7, 10001, -1, -2147483648])(
    "closes without a word on a startup packet of length %i",
    async (length) => {
      const client = await WireClient.connect(proxy.port);
      client.send(startupPacket(StartupCode.ProtocolVersion3, Buffer.from("user\0x\0\0"), length));
      await expectClosedSilently(client);
    },
  );

  it("answers a well-framed startup packet with a bad layout with 08P01, as PostgreSQL does", async () => {
    const client = await WireClient.connect(proxy.port);
    client.send(startupPacket(StartupCode.ProtocolVersion3, Buffer.from("user\0x\0")));
    await expectRefused(client, "08P01", /invalid startup packet layout/);
  });

  it("forgets a client that closes halfway through its StartupMessage", async () => {
    const packet = encodeStartupMessage(rawParams());
    const client = await WireClient.connect(proxy.port);
    client.send(packet.subarray(0, 20));
    await new Promise((r) => setTimeout(r, 50));
    client.socket.end();
    expect(await client.untilClosed()).toEqual([]);
  });

  it("drops a client that stalls in the middle of its StartupMessage after the startup timeout", async () => {
    const client = await WireClient.connect(proxy.port);
    client.send(encodeStartupMessage(rawParams()).subarray(0, 30));
    const started = Date.now();
    await client.untilClosed(6000);
    expect(Date.now() - started).toBeGreaterThanOrEqual(2500);
  });

  it.each([
    [2, 0],
    [4, 0],
    [1, 9],
  ])("refuses protocol %i.%i with 0A000 naming the version", async (major, minor) => {
    const client = await WireClient.connect(proxy.port);
    client.send(encodeStartupMessage(rawParams(), (major << 16) | minor));
    await expectRefused(client, "0A000", new RegExp(`protocol ${major}\\.${minor}\\b.*3\\.0`));
  });

  it("negotiates protocol 3.2 and unknown _pq_ options down to 3.0, then serves the session", async () => {
    const client = await WireClient.connect(proxy.port);
    client.send(encodeStartupMessage({ ...rawParams(), "_pq_.frobnicate": "on" }, (3 << 16) | 2));
    const negotiation = await client.until("R");
    const offer = negotiation.find((m) => m.type === "v");
    expect(offer).toBeDefined();
    expect(offer!.payload.readInt32BE(0)).toBe(0);
    expect(offer!.payload.readInt32BE(4)).toBe(1);
    expect(offer!.payload.toString("utf8", 8)).toBe("_pq_.frobnicate\0");
    client.send(encodeFrame(FrontendCode.PasswordMessage, Buffer.from(`${rawToken}\0`)));
    await client.until("Z");
    await expectUsable(client);
    client.send(encodeTerminate());
    await client.untilClosed();
  });

  it.each(["database", "true", "on"])("refuses replication=%s and says why", async (replication) => {
    const client = await WireClient.connect(proxy.port);
    client.send(encodeStartupMessage(rawParams({ replication })));
    await expectRefused(client, "0A000", /replication connections are not supported/);
  });

  it.each([
    ["SSLRequest", StartupCode.SSLRequest],
    ["GSSENCRequest", StartupCode.GSSENCRequest],
  ])("closes when bytes follow an %s before the answer (CVE-2021-23214)", async (_name, code) => {
    const client = await WireClient.connect(proxy.port);
    client.send(startupPacket(code), encodeStartupMessage(rawParams()));
    // No 'N' or 'S': the injected bytes are not taken as the client's, the connection is refused.
    await expectRefused(client, "08P01", /unexpected data after an encryption request/);
  });

  it("closes without a word on a TLS handshake when TLS is not configured, as PostgreSQL does", async () => {
    const client = await WireClient.connect(proxy.port);
    // The first bytes of a TLS 1.2+ ClientHello record: what `sslnegotiation=direct` sends first.
    client.send(Buffer.from([0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03, 0x03]));
    await expectClosedSilently(client);
  });

  it.each([
    ["SSLRequest", StartupCode.SSLRequest],
    ["GSSENCRequest", StartupCode.GSSENCRequest],
  ])("refuses a second %s with 08P01, as PostgreSQL does", async (name, code) => {
    const client = await WireClient.connect(proxy.port);
    expect(String.fromCharCode(await client.requestByte(startupPacket(code)))).toBe("N");
    client.send(startupPacket(code));
    await expectRefused(client, "08P01", new RegExp(`^${name} after an earlier ${name}$`));
  });

  it("answers GSSENCRequest and SSLRequest with N and goes on with a StartupMessage on the same socket", async () => {
    const client = await WireClient.connect(proxy.port);
    expect(String.fromCharCode(await client.requestByte(startupPacket(StartupCode.GSSENCRequest)))).toBe("N");
    expect(String.fromCharCode(await client.requestByte(startupPacket(StartupCode.SSLRequest)))).toBe("N");
    await client.login(rawParams(), rawToken);
    await expectUsable(client);
    client.destroy();
  });

  it("closes a CancelRequest with an unknown key without answering", async () => {
    const client = await WireClient.connect(proxy.port);
    client.send(startupPacket(StartupCode.CancelRequest, Buffer.from([0, 0, 0, 7, 1, 2, 3, 4])));
    expect(await client.untilClosed()).toEqual([]);
  });

  it("refuses a malformed password message without harm", async () => {
    for (const answer of [
      Buffer.from([0x70, 0, 0, 0, 2]), // length below 4
      Buffer.from([0x70, 0x7f, 0xff, 0xff, 0xff]), // far beyond the frame limit
      encodeFrame(FrontendCode.PasswordMessage, Buffer.from("no terminator")),
      encodeQuery("SELECT 1"), // not a password at all
    ]) {
      const client = await WireClient.connect(proxy.port);
      client.send(encodeStartupMessage(rawParams()));
      await client.until("R");
      client.send(answer);
      await expectRefused(client, "08P01");
    }
  });

  it("answers a query sent with the startup and password messages, whole or split across writes", async () => {
    const query = encodeQuery("SELECT id FROM items WHERE id <= 3 ORDER BY id");
    for (const cut of [query.length, 7]) {
      const client = await WireClient.connect(proxy.port);
      client.send(
        encodeStartupMessage(rawParams()),
        encodeFrame(FrontendCode.PasswordMessage, Buffer.from(`${rawToken}\0`)),
        query.subarray(0, cut),
      );
      await client.until("Z");
      if (cut < query.length) {
        await new Promise((r) => setTimeout(r, 50));
        client.send(query.subarray(cut));
      }
      expect(firstColumn(await client.until("Z"))).toEqual(["1", "2", "3"]);
      client.send(encodeTerminate());
      await client.untilClosed();
    }
  });

  it("leaks nothing when clients vanish during authentication and upstream connect", async () => {
    const clients = await Promise.all(Array.from({ length: 12 }, () => WireClient.connect(proxy.port)));
    for (const [i, client] of clients.entries()) {
      client.send(
        encodeStartupMessage(rawParams()),
        encodeFrame(FrontendCode.PasswordMessage, Buffer.from(`${rawToken}\0`)),
      );
      // Vanish at staggered points: before the proxy reads, while it verifies, while it connects upstream.
      setTimeout(() => client.destroy(), i * 3);
    }
    await Promise.all(clients.map((c) => c.closed));
  });

  it("leaves no reservation held when a client vanishes while its first statement is being funded", async () => {
    for (let i = 0; i < 8; i++) {
      const client = await rawSession();
      // The statement and the close arrive together: the session ends while the ledger reserves funds for it.
      client.send(encodeQuery("SELECT id FROM items"));
      client.destroy();
      await client.closed;
    }
  });

  it("does not read a client that floods while its session waits for an upstream slot", async () => {
    // A second listener sharing everything but a single upstream slot.
    const slots = new UpstreamSlots(1, 5000);
    const narrow = await startProxyServer(
      { ...proxy.ctx, slots, releases: new Set() },
      { host: "127.0.0.1", port: 0 },
    );
    const holder = new pg.Client({
      host: "127.0.0.1",
      port: narrow.port,
      user: healthyAgent.wallet,
      database: providerId,
      password: await healthyAgent.token(),
    });
    await holder.connect();
    const flooder = await WireClient.connect(narrow.port);
    try {
      flooder.send(encodeStartupMessage(rawParams()));
      await flooder.until("R");
      flooder.send(encodeFrame(FrontendCode.PasswordMessage, Buffer.from(`${rawToken}\0`)));
      const chunk = Buffer.concat(Array.from({ length: 13_000 }, () => encodeSync())); // 65 KB of Sync
      let accepted = 0;
      const stalled = async () => {
        for (;;) {
          if (accepted >= 128 * 1024 * 1024) return;
          accepted += chunk.length;
          if (!flooder.socket.write(chunk)) {
            const drained = await Promise.race([
              new Promise<boolean>((r) => flooder.socket.once("drain", () => r(true))),
              new Promise<boolean>((r) => setTimeout(() => r(false), 1000)),
            ]);
            if (!drained) return;
          }
        }
      };
      await stalled();
      // The kernel's socket buffers take a few MB; a proxy that kept reading would have taken all 128 MB.
      expect(accepted).toBeLessThan(32 * 1024 * 1024);
      expect(slots.waiting(providerId)).toBe(1);
    } finally {
      flooder.destroy();
      await holder.end();
    }
    await eventually(async () => {
      expect(slots.inUse(providerId)).toBe(0);
      expect(await rawUpstreams()).toBe(0);
    });
    await narrow.close();
  });
});

describe("ready phase", () => {
  it("ends the session with 08P01 on a frame length below 4", async () => {
    for (const length of [0, 3, -1]) {
      const client = await rawSession();
      const frame = Buffer.alloc(5);
      frame[0] = FrontendCode.Query;
      frame.writeInt32BE(length, 1);
      client.send(frame);
      await expectRefused(client, "08P01", /invalid message length/);
    }
  });

  it("ends the session with 08P01 on a huge frame length", async () => {
    const client = await rawSession();
    const frame = Buffer.alloc(5);
    frame[0] = FrontendCode.Query;
    frame.writeInt32BE(0x7fffffff, 1);
    client.send(frame);
    await expectRefused(client, "08P01", /exceeds the limit/);
  });

  it("forgets a truncated frame when the client closes", async () => {
    const client = await rawSession();
    const query = encodeQuery(`SELECT '${"x".repeat(100_000)}'`);
    client.send(query.subarray(0, 40_000));
    await new Promise((r) => setTimeout(r, 50));
    client.socket.end();
    expect(await client.untilClosed()).toEqual([]);
  });

  it("ends the session on a malformed message body", async () => {
    const client = await rawSession();
    client.send(encodeFrame(FrontendCode.Parse, Buffer.from("no terminators at all")));
    await expectRefused(client, "08P01", /invalid Parse message/);
  });

  it("ends the session on an unknown message type", async () => {
    const client = await rawSession();
    client.send(encodeFrame(0x7a /* z */, Buffer.from("??")));
    const messages = await client.untilClosed();
    expect(firstError(messages)).toMatchObject({ code: "08P01", severity: "FATAL" });
    expect(client.malformed).toBeUndefined();
  });

  it("answers Bind before Parse and Execute of an unknown portal with errors, and stays usable", async () => {
    const client = await rawSession();
    client.send(frontend.bind("", "never-parsed"), frontend.execute(""), encodeSync());
    expect(firstError(await client.until("Z"))).toMatchObject({ code: "26000" });
    client.send(frontend.execute("no-such-portal"), encodeSync());
    expect(firstError(await client.until("Z"))).toMatchObject({ code: "34000" });
    client.send(frontend.describe("S", "nope"), frontend.close("P", "nope"), encodeSync());
    expect(firstError(await client.until("Z"))).toMatchObject({ code: "26000" });
    client.send(
      frontend.parse("s1", "SELECT $1::int + 1"),
      frontend.bind("p1", "s1", ["41"]),
      frontend.execute("p1"),
      encodeSync(),
    );
    expect(firstColumn(await client.until("Z"))).toEqual(["42"]);
    await expectUsable(client);
    client.destroy();
  });

  it("answers a Sync storm with one ReadyForQuery each", async () => {
    const client = await rawSession();
    client.dropRows = true;
    const storm = 20_000;
    client.send(Buffer.concat(Array.from({ length: storm }, () => encodeSync())));
    let ready = 0;
    while (ready < storm) {
      ready += (await client.until("Z")).filter((m) => m.type === "Z").length;
    }
    // Syncs interleaved with a pipelined query keep their order.
    client.send(
      encodeSync(),
      frontend.parse("", "SELECT 7"),
      encodeSync(),
      encodeSync(),
      frontend.bind("", ""),
      frontend.execute(""),
      encodeSync(),
    );
    const messages = [
      ...(await client.until("Z")),
      ...(await client.until("Z")),
      ...(await client.until("Z")),
      ...(await client.until("Z")),
    ];
    expect(messages.map((m) => m.type).join("")).toBe("Z1ZZ2CZ");
    expect(client.rowsReceived).toBe(1);
    client.dropRows = false;
    await expectUsable(client);
    client.destroy();
  });

  it("ignores CopyData, CopyDone and CopyFail outside COPY", async () => {
    const client = await rawSession();
    client.send(frontend.copyData("1\tsneaky\n"), frontend.copyDone(), frontend.copyFail("nothing"));
    await expectUsable(client);
    client.destroy();
  });

  it("refuses FunctionCall with a clear error and stays usable", async () => {
    const client = await rawSession();
    const before = await balanceOf(rawAgent);
    client.send(frontend.functionCall(1299 /* now() */));
    const messages = await client.until("Z");
    expect(messages.map((m) => m.type)).toEqual(["E", "Z"]);
    expect(firstError(messages)).toMatchObject({
      code: "0A000",
      severity: "ERROR",
      message: expect.stringMatching(/FunctionCall message is not supported/),
    });
    // Also inside a transaction, where the refusal aborts it like any failed statement.
    client.send(encodeQuery("BEGIN"), frontend.functionCall(1299));
    await client.until("Z");
    const inTx = await client.until("Z");
    expect(inTx.at(-1)!.payload.toString()).toBe("E");
    await client.query("ROLLBACK");
    await expectUsable(client);
    client.destroy();
    await eventually(async () => expect(await balanceOf(rawAgent)).toBe(before - costOfRows(3, price)));
  });

  it("closes cleanly on Terminate in the middle of a pipeline", async () => {
    const client = await rawSession();
    client.send(
      frontend.parse("", "SELECT id FROM items"),
      frontend.bind("", ""),
      frontend.execute(""),
      encodeTerminate(),
      encodeQuery("SELECT 1"),
    );
    await client.untilClosed();
    expect(client.malformed).toBeUndefined();
  });

  it("runs and charges a write pipelined before Terminate, as PostgreSQL does", async () => {
    const before = await balanceOf(rawAgent);
    const client = await rawSession();
    client.send(
      encodeQuery("INSERT INTO orders (item_id, name) VALUES (1, 'terminate-1'), (2, 'terminate-1')"),
      encodeTerminate(),
    );
    const messages = await client.untilClosed();
    expect(commandTags(messages)).toEqual(["INSERT 0 2"]);
    const { rows } = await observer.query("SELECT count(*)::int AS n FROM orders WHERE name = 'terminate-1'");
    expect(rows[0].n).toBe(2);
    await eventually(async () => expect(await balanceOf(rawAgent)).toBe(before - costOfRows(2, price)));
  });
});

describe("clients that vanish or stop reading", () => {
  it("charges the rows delivered and frees the upstream when a client vanishes mid-result", async () => {
    const before = await balanceOf(rawAgent);
    const entriesBefore = (
      await listLedgerEntries(gateway.ctx.db, rawAgent.wallet, { providerId, limit: 1 })
    )[0]?.id;
    const client = await rawSession();
    client.dropRows = true;
    client.send(encodeQuery(BIG_RESULT));
    await eventually(async () => expect(client.rowsReceived).toBeGreaterThan(20_000), 10_000);
    client.destroy();
    const received = client.rowsReceived;
    await expectNoLeaks();
    const [entry] = await listLedgerEntries(gateway.ctx.db, rawAgent.wallet, { providerId, limit: 1 });
    expect(entry?.id).not.toBe(entriesBefore);
    const charged = Number(entry!.metadata.rowCount);
    // The proxy charges what it handed to the socket: at least what the client read, not the whole result.
    expect(charged).toBeGreaterThanOrEqual(received);
    expect(charged).toBeLessThan(2_000_000);
    expect(await balanceOf(rawAgent)).toBe(before - costOfRows(charged, price));
  });

  it("cancels the upstream statement when its client vanishes", async () => {
    const client = await rawSession();
    client.send(encodeQuery("SELECT pg_sleep(8)"));
    await eventually(async () => {
      const { rows } = await observer.query(
        "SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = $1 AND query = 'SELECT pg_sleep(8)' AND state = 'active'",
        [providerDb.name],
      );
      expect(rows[0].n).toBe(1);
    });
    client.destroy();
    // expectNoLeaks (after each) allows 5 s: well before the sleep would end on its own.
  });

  it("charges a write whose client vanished before the result came back", async () => {
    const before = await balanceOf(rawAgent);
    const client = await rawSession();
    client.send(
      encodeQuery(
        "INSERT INTO orders (item_id, name) SELECT 3, 'vanished-1' FROM pg_sleep(0.3), generate_series(1, 4)",
      ),
    );
    await new Promise((r) => setTimeout(r, 100));
    client.destroy();
    await expectNoLeaks();
    const { rows } = await observer.query("SELECT count(*)::int AS n FROM orders WHERE name = 'vanished-1'");
    // A write either ran and was charged, or was cancelled and cost nothing: never a free write.
    expect(await balanceOf(rawAgent)).toBe(before - costOfRows(rows[0].n, price));
  });

  it("relays a large result to a reading client without queuing it while the ledger grows the reservation", async () => {
    const client = await rawSession();
    try {
      client.dropRows = true;
      const start = await relayedFromUpstream();
      client.send(encodeQuery(WIDE_RESULT));
      let largestLead = 0;
      const sampler = setInterval(async () => {
        largestLead = Math.max(largestLead, (await relayedFromUpstream()) - start - client.bytesReceived);
      }, 20);
      const messages = await client.until("Z", 50_000).finally(() => clearInterval(sampler));
      expect(firstError(messages)).toBeUndefined();
      expect(client.rowsReceived).toBe(300_000);
      // What the proxy has read but the client not yet received: socket buffers and a chunk, not the result.
      expect(largestLead).toBeLessThan(24 * 1024 * 1024);
    } finally {
      client.destroy();
    }
  });

  it("stops reading the upstream while a client does not read, then delivers and charges every row", async () => {
    const before = await balanceOf(rawAgent);
    const client = await rawSession();
    try {
      client.dropRows = true;
      const start = await relayedFromUpstream();
      const toClient = proxySideOf(client);
      client.socket.pause();
      client.send(encodeQuery(WIDE_RESULT));
      let largestBacklog = 0;
      for (let i = 0; i < 8; i++) {
        await new Promise((r) => setTimeout(r, 250));
        largestBacklog = Math.max(largestBacklog, toClient.writableLength);
      }
      // The proxy holds at most a chunk or two for the client; the rest of the ~70 MB stays upstream, apart
      // from what the kernel's socket buffers took.
      expect(largestBacklog).toBeLessThan(1024 * 1024);
      expect((await relayedFromUpstream()) - start).toBeLessThan(40 * 1024 * 1024);
      client.socket.resume();
      const messages = await client.until("Z", 50_000);
      expect(firstError(messages)).toBeUndefined();
      expect(client.rowsReceived).toBe(300_000);
      expect(commandTags(messages)).toEqual(["SELECT 300000"]);
    } finally {
      client.destroy();
    }
    await eventually(async () => expect(await balanceOf(rawAgent)).toBe(before - costOfRows(300_000, price)));
  });
});

describe("shutdown", () => {
  it("charges sessions that are mid-result or mid-statement before close() resolves", async () => {
    const slots = new UpstreamSlots(10, 5000);
    const closing = await startProxyServer(
      { ...proxy.ctx, slots, releases: new Set() },
      { host: "127.0.0.1", port: 0 },
    );
    const paused = await WireClient.connect(closing.port);
    await paused.login(rawParams(), rawToken);
    paused.socket.pause();
    paused.send(encodeQuery(WIDE_RESULT));
    const sleeper = await WireClient.connect(closing.port);
    await sleeper.login(rawParams(), rawToken);
    sleeper.send(encodeQuery("SELECT pg_sleep(20)"));
    await eventually(async () =>
      expect((await getBalance(gateway.ctx.db, rawAgent.wallet, providerId)).reservedMicro).toBeGreaterThan(
        0n,
      ),
    );
    await closing.close();
    // Nothing is left to write once close() is done: the ledger can be shut right after it.
    expect(slots.inUse(providerId)).toBe(0);
    expect((await getBalance(gateway.ctx.db, rawAgent.wallet, providerId)).reservedMicro).toBe(0n);
    paused.destroy();
    sleeper.destroy();
  });
});
