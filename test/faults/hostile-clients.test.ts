import { readFileSync } from "node:fs";
import { connect, type Socket } from "node:net";
import fc from "fast-check";
import pg from "pg";
import { generatePrivateKey, privateKeyToAddress } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createAgentToken } from "../../src/proxy/agent-token.js";
import { createMetadataDatabase, type TestDatabase } from "../support/database.js";
import { createProviderDatabase } from "../support/gateway.js";
import {
  creditAgent,
  type PgtollProcess,
  registerProviderOver,
  startPgtollProcess,
} from "../support/pgtoll-process.js";
import { waitFor } from "../support/real-clients.js";

const TIMEOUT_MS = 2000;
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
  });
}

/** The first bytes the server sends on a socket ("" if it closes without answering). */
function firstAnswer(socket: Socket): Promise<string> {
  return new Promise((resolve) => {
    socket.once("data", (chunk) => resolve(String(chunk)));
    socket.once("close", () => resolve(""));
  });
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
