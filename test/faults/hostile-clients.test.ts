import { readdirSync, readFileSync, readlinkSync } from "node:fs";
import { connect, type Socket } from "node:net";
import fc from "fast-check";
import pg from "pg";
import { generatePrivateKey, privateKeyToAddress } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createAgentToken } from "../../src/proxy/agent-token.js";
import { FrontendCode } from "../../src/proxy/message-codes.js";
import { encodeFrame, encodePasswordMessage, encodeStartupMessage } from "../../src/proxy/serializer.js";
import { createMetadataDatabase, type TestDatabase } from "../support/database.js";
import { createProviderDatabase } from "../support/gateway.js";
import {
  creditAgent,
  type PgtollProcess,
  registerProviderOver,
  startPgtollProcess,
} from "../support/pgtoll-process.js";
import { waitFor } from "../support/real-clients.js";
import { firstError, WireClient } from "../support/wire-client.js";

const TIMEOUT_MS = 2000;
const MIB = 1_048_576;
/** How long a refused client may keep its socket: the error's linger, with room for a loaded machine. */
const REFUSED_CLOSE_BOUND_MS = 5000;
let meta: { db: TestDatabase; close(): Promise<void> };
let providerDb: TestDatabase;
let pgtoll: PgtollProcess;
let port: number;
let providerId: string;
const key = generatePrivateKey();
const wallet = privateKeyToAddress(key).toLowerCase();

beforeAll(async () => {
  meta = await createMetadataDatabase();
  providerDb = await createProviderDatabase(20);
  pgtoll = await startPgtollProcess(meta.db.url, {
    PGTOLL_HTTP_REQUEST_TIMEOUT_MS: String(TIMEOUT_MS),
    PGTOLL_PROXY_STARTUP_TIMEOUT_MS: String(TIMEOUT_MS),
  });
  port = Number(new URL(pgtoll.httpUrl).port);
  providerId = await registerProviderOver(pgtoll.httpUrl, providerDb.url, {
    basePricePer1000Rows: 1,
    markupMultiplier: 1,
  });
  await creditAgent(meta.db.url, wallet, providerId, 10_000_000n);
}, 120_000);
afterAll(async () => {
  await pgtoll?.stop();
  await providerDb?.drop();
  await meta?.close();
});

/** Resident memory of the pgtoll process, in MB. */
function rssMb(): number {
  const status = readFileSync(`/proc/${pgtoll.cli.child.pid}/status`, "utf8");
  return Number(/VmRSS:\s+(\d+)/.exec(status)?.[1]) / 1024;
}

/** Client connections pgtoll holds open on its proxy port: its socket descriptors, looked up in the kernel's table. */
function proxyConnectionsHeld(): number {
  const pid = pgtoll.cli.child.pid;
  const held = new Set(
    readdirSync(`/proc/${pid}/fd`).flatMap((fd) => {
      try {
        return [/^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`))?.[1]];
      } catch {
        return []; // closed while listed
      }
    }),
  );
  const LISTEN = "0A";
  return ["tcp", "tcp6"]
    .flatMap((table) => readFileSync(`/proc/${pid}/net/${table}`, "utf8").trim().split("\n").slice(1))
    .map((line) => line.trim().split(/\s+/))
    .filter(([, local = "", , state, , , , , , inode]) => {
      const port = Number.parseInt(local.split(":")[1] ?? "", 16);
      return port === pgtoll.proxyPort && state !== LISTEN && held.has(inode);
    }).length;
}

/** A normal agent, served while the hostile ones are connected: one HTTP request and one proxy query. */
async function normalClientServed(): Promise<void> {
  expect((await fetch(`${pgtoll.httpUrl}/api/health`)).status).toBe(200);
  const client = new pg.Client({
    host: "127.0.0.1",
    port: pgtoll.proxyPort,
    user: wallet,
    database: providerId,
    password: await createAgentToken(key, providerId),
  });
  await client.connect();
  expect((await client.query("SELECT id FROM items WHERE id <= 2")).rowCount).toBe(2);
  await client.end();
}

function openSocket(target: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = connect(target, "127.0.0.1", () => resolve(socket));
    socket.on("error", reject);
  });
}

/** Resolves when the server has closed the socket, with how long that took. */
function closedBy(socket: Socket): Promise<number> {
  const started = Date.now();
  return new Promise((resolve) => {
    socket.on("error", () => {});
    socket.once("close", () => resolve(Date.now() - started));
    // Read what the server sends (a 408, say): a socket whose data is never read never sees the server's close.
    socket.resume();
  });
}

/** The first bytes the server sends on a socket ("" if it closes without answering). */
function firstAnswer(socket: Socket): Promise<string> {
  return new Promise((resolve) => {
    socket.once("data", (chunk) => resolve(String(chunk)));
    socket.once("close", () => resolve(""));
  });
}

/** Runs `work` while sampling pgtoll's RSS every 50 ms; returns its result and the highest RSS seen, in MB. */
async function withPeakRss<T>(work: () => Promise<T>): Promise<[T, number]> {
  let peak = rssMb();
  const sampler = setInterval(() => {
    peak = Math.max(peak, rssMb());
  }, 50);
  try {
    const result = await work();
    return [result, Math.max(peak, rssMb())];
  } finally {
    clearInterval(sampler);
  }
}

/**
 * Writes `chunk` again and again, up to `limitBytes`, until the socket closes, fails or stalls for 3 s (the peer
 * stopped reading); returns the bytes handed to the socket.
 */
async function writeUntilStopped(socket: Socket, chunk: Buffer, limitBytes: number): Promise<number> {
  let sent = 0;
  while (sent < limitBytes && socket.writable && !socket.destroyed) {
    sent += chunk.length;
    if (socket.write(chunk)) continue;
    const stalled = await new Promise<boolean>((resolve) => {
      const done = (value: boolean) => {
        clearTimeout(timer);
        socket.off("drain", drained).off("close", closed);
        resolve(value);
      };
      const drained = () => done(false);
      const closed = () => done(false);
      const timer = setTimeout(() => done(true), 3000);
      socket.once("drain", drained).once("close", closed);
    });
    if (stalled) break;
  }
  return sent;
}

/** A wire-proxy client whose side stays writable after pgtoll ends its own, so it can write on when refused. */
function halfOpenClient(): Promise<WireClient> {
  return WireClient.connect(pgtoll.proxyPort, "127.0.0.1", { allowHalfOpen: true });
}

/** A half-open client that has sent its StartupMessage and been asked for its password. */
async function askedForPassword(): Promise<WireClient> {
  const client = await halfOpenClient();
  client.send(encodeStartupMessage({ user: wallet, database: providerId }));
  await client.until("R");
  return client;
}

describe("hostile clients", () => {
  it("5 000 idle connections on each port: a normal client is served, memory stays bounded, the idle ones are dropped", async () => {
    const before = rssMb();
    // Each socket's close is watched from its first moment: the first ones may be cut off before the last open.
    const closed: Promise<number>[] = [];
    const openWatched = async (target: number) => {
      const socket = await openSocket(target);
      closed.push(closedBy(socket));
    };
    for (const target of [port, pgtoll.proxyPort]) {
      for (let batch = 0; batch < 10; batch++) {
        await Promise.all(Array.from({ length: 500 }, () => openWatched(target)));
      }
    }
    const during = rssMb();
    await normalClientServed();
    const closedWithin = await Promise.all(closed);
    const after = rssMb();
    console.log(
      `10 000 idle sockets: pgtoll RSS ${before.toFixed(0)} MB -> ${during.toFixed(0)} MB while open -> ${after.toFixed(0)} MB; ` +
        `all closed by pgtoll within ${Math.max(...closedWithin)} ms`,
    );
    expect(during - before).toBeLessThan(200);
    // Both ports time a connection that never sends a request or a startup message.
    expect(Math.max(...closedWithin)).toBeLessThan(TIMEOUT_MS + 6000);
  }, 120_000);

  it("slowloris: headers or a body trickled a byte at a time are cut off after the request timeout", async () => {
    for (const start of [
      "GET /api/health HTTP/1.1\r\nHost: localhost\r\nX-Slow: ",
      "POST /api/query HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{",
    ]) {
      const socket = await openSocket(port);
      const closed = closedBy(socket);
      socket.write(start);
      const drip = setInterval(() => socket.write("a"), 200);
      const tookMs = await closed;
      clearInterval(drip);
      expect(tookMs).toBeLessThan(TIMEOUT_MS + 6000);
    }
    await normalClientServed();
  }, 90_000);

  it("a 1 MB body gets 413 with {error}; a 100 MB one is refused without being read into memory", async () => {
    const big = await fetch(`${pgtoll.httpUrl}/api/query`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ sql: "x".repeat(1_048_576), agentWallet: wallet, providerId }),
    });
    expect(big.status).toBe(413);
    expect(await big.json()).toEqual({ error: "request body too large" });
    const before = rssMb();
    // Announced: refused from the headers alone, before a byte of the body is read.
    const announced = await openSocket(port);
    const announcedClosed = closedBy(announced);
    const answered = firstAnswer(announced);
    announced.write(
      `POST /api/query HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: ${100 * 1_048_576}\r\n\r\n`,
    );
    expect(await answered).toMatch(/^HTTP\/1.1 413/);
    await announcedClosed;
    // Chunked, so its size is unknown up front: streamed until pgtoll stops reading, which it must do long
    // before 100 MB (the socket closes or the writes stall).
    const chunked = await openSocket(port);
    const chunkedClosed = closedBy(chunked);
    const chunkedAnswer = firstAnswer(chunked);
    chunked.write(
      "POST /api/query HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n",
    );
    const chunk = Buffer.alloc(1_048_576, 0x20);
    let sentMb = 0;
    for (; sentMb < 100 && !chunked.destroyed; sentMb++) {
      chunked.write(`${chunk.length.toString(16)}\r\n`);
      const flushed = chunked.write(Buffer.concat([chunk, Buffer.from("\r\n")]));
      if (!flushed) {
        const stalled = await Promise.race([
          new Promise((resolve) =>
            chunked.once("drain", () => resolve(false)).once("close", () => resolve(false)),
          ),
          new Promise((resolve) => setTimeout(() => resolve(true), 3000)),
        ]);
        if (stalled) break;
      }
    }
    chunked.destroy();
    await chunkedClosed;
    console.log(
      `100 MB chunked body: pgtoll stopped it after ${sentMb} MB sent; answer ${JSON.stringify((await chunkedAnswer).slice(0, 12))}`,
    );
    expect(sentMb).toBeLessThan(100);
    expect(rssMb() - before).toBeLessThan(50);
    await normalClientServed();
  }, 60_000);

  it("every route of the OpenAPI document, fed generated bad input, answers 4xx (never a 5xx) and pgtoll stays up", async () => {
    const doc = (await (await fetch(`${pgtoll.httpUrl}/docs/json`)).json()) as {
      paths: Record<string, Record<string, unknown>>;
    };
    const routes = Object.entries(doc.paths).flatMap(([path, methods]) =>
      Object.keys(methods)
        .filter((method) => ["get", "post", "patch", "put", "delete"].includes(method))
        .map((method) => ({ path, method: method.toUpperCase() })),
    );
    expect(routes.length).toBeGreaterThan(30);
    const hostileText = fc.oneof(
      fc.string(),
      fc.constantFrom(
        "",
        "'; DROP TABLE items; --",
        "0x",
        "-1",
        "1e309",
        "%00",
        "../../etc/passwd",
        "\u0000",
      ),
    );
    const body = fc.oneof(fc.jsonValue(), fc.dictionary(hostileText, fc.jsonValue()), hostileText);
    const failures: string[] = [];
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...routes), hostileText, body, async (route, segment, payload) => {
        const path = route.path.replace(/\{[^}]+\}/g, () => encodeURIComponent(segment) || "x");
        const response = await fetch(`${pgtoll.httpUrl}${path}`, {
          method: route.method,
          headers: { "content-type": "application/json", authorization: "Bearer nonsense" },
          ...(route.method === "GET" || route.method === "DELETE" ? {} : { body: JSON.stringify(payload) }),
        });
        if (response.status >= 500)
          failures.push(`${route.method} ${path}: ${response.status} ${await response.text()}`);
        else await response.arrayBuffer();
      }),
      { numRuns: 600 },
    );
    expect(failures).toEqual([]);
    await waitFor(async () => (await fetch(`${pgtoll.httpUrl}/api/health`)).status === 200, 5000, "health");
  }, 120_000);
});

describe("hostile clients before authentication", () => {
  it("4 clients refused for a wrong token that keep their side open and write 1 MiB queries: pgtoll stops reading, closes them within seconds, memory stays flat", async () => {
    const before = rssMb();
    const query = encodeFrame(FrontendCode.Query, Buffer.alloc(MIB - 5, 0x20));
    const [writers, peak] = await withPeakRss(() =>
      Promise.all(
        Array.from({ length: 4 }, async () => {
          const client = await askedForPassword();
          client.send(encodePasswordMessage("pgtoll1.1.0xnot-a-signature"));
          const refusal = firstError(await client.until("E"));
          const refusedAt = Date.now();
          const sent = await writeUntilStopped(client.socket, query, 75 * MIB);
          await client.untilClosed(REFUSED_CLOSE_BOUND_MS);
          return { code: refusal?.code, sent, openMs: Date.now() - refusedAt };
        }),
      ),
    );
    const sentMb = writers.reduce((sum, w) => sum + w.sent, 0) / MIB;
    console.log(
      `4 half-open writers after a wrong token: ${sentMb.toFixed(0)} MB written before pgtoll cut them off, ` +
        `closed ${Math.max(...writers.map((w) => w.openMs))} ms after the refusal at most; ` +
        `pgtoll RSS ${before.toFixed(0)} MB -> peak ${peak.toFixed(0)} MB`,
    );
    expect(writers.map((w) => w.code)).toEqual(["28P01", "28P01", "28P01", "28P01"]);
    for (const writer of writers) expect(writer.sent).toBeLessThan(75 * MIB);
    expect(peak - before).toBeLessThan(50);
    await normalClientServed();
  }, 120_000);

  it("500 connections refused for protocol 4.0 whose clients never close are all closed by pgtoll within seconds", async () => {
    const clients: WireClient[] = [];
    for (let batch = 0; batch < 5; batch++) {
      clients.push(...(await Promise.all(Array.from({ length: 100 }, () => halfOpenClient()))));
    }
    const codes = await Promise.all(
      clients.map(async (client) => {
        client.send(encodeStartupMessage({ user: wallet, database: providerId }, 4 << 16));
        return firstError(await client.until("E"))?.code;
      }),
    );
    const refusedAt = Date.now();
    expect(new Set(codes)).toEqual(new Set(["0A000"]));
    // The clients keep their sockets: only pgtoll's side can be counted closed.
    await waitFor(
      () => proxyConnectionsHeld() === 0,
      REFUSED_CLOSE_BOUND_MS,
      "pgtoll to close the refused sockets",
    );
    console.log(
      `500 refused sockets left open by their clients: pgtoll held none ${Date.now() - refusedAt} ms after the last refusal`,
    );
    for (const client of clients) client.destroy();
    await normalClientServed();
  }, 60_000);

  it("12 password messages that announce 60 MB each are refused from their length word, before the bytes arrive", async () => {
    const before = rssMb();
    const announced = 60 * MIB;
    const header = Buffer.alloc(5);
    header[0] = FrontendCode.PasswordMessage;
    header.writeInt32BE(announced + 4, 1);
    const [senders, peak] = await withPeakRss(() =>
      Promise.all(
        Array.from({ length: 12 }, async () => {
          const client = await askedForPassword();
          client.send(header);
          // The answer comes from the header alone, before a byte of the body is sent.
          const error = firstError(await client.until("E"));
          // Then the body (all but its last byte) for as long as pgtoll takes it.
          const sent = await writeUntilStopped(client.socket, Buffer.alloc(MIB), announced - MIB);
          await client.untilClosed(REFUSED_CLOSE_BOUND_MS);
          return { sent, error };
        }),
      ),
    );
    console.log(
      `12 password messages of 60 MB: ${(senders.reduce((sum, s) => sum + s.sent, 0) / MIB).toFixed(0)} MB written before pgtoll cut them off; ` +
        `pgtoll RSS ${before.toFixed(0)} MB -> peak ${peak.toFixed(0)} MB`,
    );
    for (const { sent, error } of senders) {
      expect(error).toMatchObject({ severity: "FATAL", code: "08P01" });
      expect(error?.message).toMatch(/^password message of 62914560 bytes exceeds the limit of 1001$/);
      expect(sent).toBeLessThan(announced - MIB);
    }
    expect(peak - before).toBeLessThan(50);
    await normalClientServed();
  }, 120_000);
});
