import { execFileSync } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { type Socket, connect as tcpConnect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type ConnectionOptions, createSecureContext, type TLSSocket, connect as tlsConnect } from "node:tls";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { decodeAuthentication, decodeDataRow, decodeNoticeFields } from "../../src/proxy/backend-messages.js";
import {
  encodePasswordMessage,
  encodeQuery,
  encodeStartupMessage,
  encodeTerminate,
} from "../../src/proxy/serializer.js";
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
import {
  expectChargedPerStatement,
  missingTool,
  ODD_PRICING,
  runProcess,
  waitForCharges,
} from "../support/real-clients.js";

const OPENSSL = "/usr/bin/openssl";
const PSQL = "/usr/bin/psql";
const skipReason = missingTool(OPENSSL, "apt-get install openssl");
if (skipReason) console.warn(`skipping TLS tests: ${skipReason}`);
const psqlMissing = missingTool(PSQL, "apt-get install postgresql-client");

const SSL_REQUEST = 80877103;
const GSSENC_REQUEST = 80877104;

let gateway: TestGateway;
let proxy: TestProxy;
let providerDb: TestDatabase;
let providerId: string;
let dir: string;
const FUNDS = 1_000_000n;

function encryptionRequest(code: number): Buffer {
  const request = Buffer.alloc(8);
  request.writeInt32BE(8, 0);
  request.writeInt32BE(code, 4);
  return request;
}

/** Reads single bytes (encryption answers) and typed frames from a socket, by hand. */
function wire(socket: Socket | TLSSocket) {
  let buffered = Buffer.alloc(0);
  let closed = false;
  let wake: (() => void) | null = null;
  const onData = (chunk: Buffer) => {
    buffered = Buffer.concat([buffered, chunk]);
    wake?.();
  };
  socket.on("data", onData);
  socket.on("close", () => {
    closed = true;
    wake?.();
  });
  socket.on("error", () => {});
  const until = async <T>(take: () => T | undefined): Promise<T> => {
    for (;;) {
      const value = take();
      if (value !== undefined) return value;
      if (closed) throw new Error("the proxy closed the connection");
      await new Promise<void>((resolve) => (wake = resolve));
      wake = null;
    }
  };
  return {
    byte: () =>
      until(() => {
        if (buffered.length < 1) return undefined;
        const byte = String.fromCharCode(buffered[0]!);
        buffered = buffered.subarray(1);
        return byte;
      }),
    frame: () =>
      until(() => {
        if (buffered.length < 5) return undefined;
        const end = 1 + buffered.readInt32BE(1);
        if (buffered.length < end) return undefined;
        const frame = {
          code: String.fromCharCode(buffered[0]!),
          payload: Buffer.from(buffered.subarray(5, end)),
        };
        buffered = buffered.subarray(end);
        return frame;
      }),
    /** Stops reading, so that a TLS socket can take the connection over. */
    detach: () => socket.off("data", onData),
  };
}

/** Startup, agent token and one query on a socket whose encryption is already settled; returns the answer. */
async function queryByHand(
  socket: Socket | TLSSocket,
  agent: TestAgent,
  sql: string,
): Promise<string | null> {
  const conn = wire(socket);
  socket.write(encodeStartupMessage({ user: agent.wallet, database: providerId }));
  const ask = await conn.frame();
  expect(ask.code).toBe("R");
  expect(decodeAuthentication(ask.payload).type).toBe("cleartextPassword");
  socket.write(encodePasswordMessage(await agent.token()));
  for (let frame = await conn.frame(); frame.code !== "Z"; frame = await conn.frame()) {
    if (frame.code === "E") throw new Error(decodeNoticeFields(frame.payload).message);
  }
  socket.write(encodeQuery(sql));
  let value: string | null = null;
  for (let frame = await conn.frame(); frame.code !== "Z"; frame = await conn.frame()) {
    if (frame.code === "D") value = decodeDataRow(frame.payload)[0]?.toString("utf8") ?? null;
    if (frame.code === "E") throw new Error(decodeNoticeFields(frame.payload).message);
  }
  socket.end(encodeTerminate());
  return value;
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

function openSocket(port: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = tcpConnect(port, "127.0.0.1", () => resolve(socket));
    socket.once("error", reject);
  });
}

/** A TLS client connection (`options` as tls.connect takes them) offering `alpn` if given, once its handshake is done. */
async function tlsClient(options: ConnectionOptions, alpn?: string[]): Promise<TLSSocket> {
  const secure = tlsConnect({
    rejectUnauthorized: false,
    ...options,
    ...(alpn ? { ALPNProtocols: alpn } : {}),
  });
  await new Promise<void>((resolve, reject) => {
    secure.once("secureConnect", resolve);
    secure.once("error", reject);
  });
  return secure;
}

/** A socket upgraded to TLS after an SSLRequest answered 'S'. */
async function upgradedByRequest(alpn?: string[]): Promise<TLSSocket> {
  const raw = await openSocket(proxy.port);
  const rawWire = wire(raw);
  raw.write(encryptionRequest(SSL_REQUEST));
  expect(await rawWire.byte()).toBe("S");
  rawWire.detach();
  return tlsClient({ socket: raw }, alpn);
}

/** A TLS connection whose ClientHello is the first bytes on the socket, as `sslnegotiation=direct` opens. */
function directTls(alpn?: string[]): Promise<TLSSocket> {
  return tlsClient({ host: "127.0.0.1", port: proxy.port }, alpn);
}

describe.skipIf(skipReason !== null)("TLS and encryption negotiation", () => {
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "pgtoll-tls-"));
    const [key, cert] = [join(dir, "key.pem"), join(dir, "cert.pem")];
    execFileSync(
      OPENSSL,
      [
        "req",
        "-x509",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
        "-keyout",
        key,
        "-out",
        cert,
        "-days",
        "1",
        "-subj",
        "/CN=localhost",
      ],
      { stdio: "ignore" },
    );
    gateway = await startTestGateway();
    proxy = await startTestProxy(gateway, {
      tls: createSecureContext({ key: await readFile(key), cert: await readFile(cert) }),
    });
    providerDb = await createProviderDatabase(10);
    ({ providerId } = await registerPricedProvider(gateway, providerDb.url, ODD_PRICING));
  });
  afterAll(async () => {
    await proxy?.close();
    await gateway?.close();
    await providerDb?.drop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it("serves node-postgres over TLS (ssl: { rejectUnauthorized: false })", async () => {
    const agent = await fundedTestAgent(gateway, providerId, FUNDS);
    const client = new pg.Client({
      host: "127.0.0.1",
      port: proxy.port,
      user: agent.wallet,
      database: providerId,
      password: await agent.token(),
      ssl: { rejectUnauthorized: false },
    });
    await client.connect();
    const stream = (client as unknown as { connection: { stream: Socket } }).connection.stream;
    expect((stream as TLSSocket).encrypted).toBe(true);
    expect((stream as TLSSocket).getPeerCertificate().subject?.CN).toBe("localhost");
    expect((await client.query("SELECT id, name FROM items WHERE id IN (2, 4, 6) ORDER BY id")).rows).toEqual(
      [
        { id: 2, name: "item 2" },
        { id: 4, name: "item 4" },
        { id: 6, name: "item 6" },
      ],
    );
    await client.end();
    await waitForCharges(proxy);
    await expectChargedPerStatement(gateway, agent, providerId, FUNDS, [{ rows: 3 }]);
  });

  it.skipIf(psqlMissing !== null)("serves psql with sslmode=require", async () => {
    const agent = await fundedTestAgent(gateway, providerId, FUNDS);
    const result = await runProcess(
      PSQL,
      ["-X", "-A", "-t", "-c", "\\conninfo", "-c", "SELECT count(*) FROM items"],
      {
        env: {
          PGHOST: "127.0.0.1",
          PGPORT: String(proxy.port),
          PGUSER: agent.wallet,
          PGDATABASE: providerId,
          PGPASSWORD: await agent.token(),
          PGSSLMODE: "require",
        },
      },
    );
    expect(result.stderr).toBe("");
    expect(result.stdout).toMatch(/SSL connection \(protocol: TLSv1\.[23],/);
    expect(result.stdout.trim().split("\n").at(-1)).toBe("10");
    await waitForCharges(proxy);
    await expectChargedPerStatement(gateway, agent, providerId, FUNDS, [
      { rows: 1, sql: "SELECT count(*) FROM items" },
    ]);
  });

  // libpq sends GSSENCRequest only when it holds Kerberos credentials, so the request is made by hand.
  it("answers GSSENCRequest with N and goes on, in the clear or with an SSLRequest next", async () => {
    const agent = await fundedTestAgent(gateway, providerId, FUNDS);

    const plain = await openSocket(proxy.port);
    const plainWire = wire(plain);
    plain.write(encryptionRequest(GSSENC_REQUEST));
    expect(await plainWire.byte()).toBe("N");
    plainWire.detach();
    expect(await queryByHand(plain, agent, "SELECT 'gss refused, clear text on loopback'")).toBe(
      "gss refused, clear text on loopback",
    );

    // What libpq does with gssencmode=prefer and sslmode=require: GSS first, then TLS on the same socket.
    const raw = await openSocket(proxy.port);
    const rawWire = wire(raw);
    raw.write(encryptionRequest(GSSENC_REQUEST));
    expect(await rawWire.byte()).toBe("N");
    raw.write(encryptionRequest(SSL_REQUEST));
    expect(await rawWire.byte()).toBe("S");
    rawWire.detach();
    const secure = await tlsClient({ socket: raw });
    expect(await queryByHand(secure, agent, "SELECT 'gss refused, then TLS'")).toBe("gss refused, then TLS");

    await waitForCharges(proxy);
    await expectChargedPerStatement(gateway, agent, providerId, FUNDS, [{ rows: 1 }, { rows: 1 }]);
  });

  describe("direct TLS (sslnegotiation=direct)", () => {
    it("serves a TLS handshake with ALPN postgresql as the first bytes, or after an SSLRequest", async () => {
      for (const open of [() => directTls(["postgresql"]), () => upgradedByRequest(["postgresql"])]) {
        const agent = await fundedTestAgent(gateway, providerId, FUNDS);
        const secure = await open();
        expect(secure.alpnProtocol).toBe("postgresql");
        expect(await queryByHand(secure, agent, "SELECT 'TLS with ALPN'")).toBe("TLS with ALPN");
        await waitForCharges(proxy);
        await expectChargedPerStatement(gateway, agent, providerId, FUNDS, [{ rows: 1 }]);
      }
    });

    it("serves node-postgres with sslnegotiation=direct", async () => {
      const agent = await fundedTestAgent(gateway, providerId, FUNDS);
      const client = await connectAgent(proxy, agent, providerId, {
        ssl: { rejectUnauthorized: false },
        sslnegotiation: "direct",
      } as Partial<pg.ClientConfig>);
      const stream = (client as unknown as { connection: { stream: TLSSocket } }).connection.stream;
      expect(stream.alpnProtocol).toBe("postgresql");
      expect((await client.query("SELECT 'direct from node-postgres' AS via")).rows).toEqual([
        { via: "direct from node-postgres" },
      ]);
      await client.end();
      await waitForCharges(proxy);
      await expectChargedPerStatement(gateway, agent, providerId, FUNDS, [{ rows: 1 }]);
    });

    it("closes a direct handshake without ALPN once it completes, without a word, as PostgreSQL does", async () => {
      const secure = await directTls();
      expect(secure.alpnProtocol).toBe(false);
      let received = 0;
      secure.on("data", (chunk: Buffer) => (received += chunk.length));
      secure.on("error", () => {});
      secure.write(
        encodeStartupMessage({ user: "0x0000000000000000000000000000000000000000", database: providerId }),
      );
      await new Promise((resolve) => secure.once("close", resolve));
      expect(received).toBe(0);
    });

    it("fails the handshake of a client whose ALPN does not offer postgresql", async () => {
      for (const offer of [directTls(["h2"]), upgradedByRequest(["h2", "http/1.1"])]) {
        await expect(offer).rejects.toMatchObject({ code: "ERR_SSL_TLSV1_ALERT_NO_APPLICATION_PROTOCOL" });
      }
    });

    it("refuses an encryption request inside TLS with 08P01, however TLS was negotiated", async () => {
      for (const [open, code, name] of [
        [() => upgradedByRequest(), SSL_REQUEST, "SSLRequest"],
        [() => upgradedByRequest(), GSSENC_REQUEST, "GSSENCRequest"],
        [() => directTls(["postgresql"]), SSL_REQUEST, "SSLRequest"],
        [() => directTls(["postgresql"]), GSSENC_REQUEST, "GSSENCRequest"],
      ] as const) {
        const secure = await open();
        const conn = wire(secure);
        secure.write(encryptionRequest(code));
        const answer = await conn.frame();
        expect(answer.code).toBe("E");
        expect(decodeNoticeFields(answer.payload)).toMatchObject({
          severity: "FATAL",
          code: "08P01",
          message: `${name} after the connection was encrypted`,
        });
        await new Promise((resolve) => (secure.closed ? resolve(null) : secure.once("close", resolve)));
      }
    });
  });

  /**
   * A client on another machine cannot be made here (the tests reach loopback only), so these sessions are run by
   * `runClientSession` on real loopback sockets whose peer address reads as a remote one (203.0.113.7, a
   * documentation address). The address rule itself is unit-tested in src/proxy/loopback.test.ts.
   */
  describe("a client that is not on loopback", () => {
    let remote: Awaited<ReturnType<typeof listenAsSeenFrom>>;
    let port: number;
    /** The proxy's side of each connection, by the client's port. */
    const accepted = new Map<number, Socket>();
    beforeAll(async () => {
      remote = await listenAsSeenFrom(proxy, "203.0.113.7", (socket) =>
        accepted.set(socket.remotePort!, socket),
      );
      port = remote.port;
    });
    afterAll(async () => {
      await remote?.close();
    });

    it("is refused with 28000 before it is asked for its token, when it does not use TLS", async () => {
      const agent = await fundedTestAgent(gateway, providerId, FUNDS);
      const socket = await openSocket(port);
      const conn = wire(socket);
      socket.write(encodeStartupMessage({ user: agent.wallet, database: providerId }));
      const answer = await conn.frame();
      expect(answer.code).toBe("E");
      expect(decodeNoticeFields(answer.payload)).toMatchObject({
        severity: "FATAL",
        code: "28000",
        message: "pgtoll accepts agent tokens only over TLS or from loopback",
        hint: "connect with sslmode=require",
      });

      const client = new pg.Client({
        host: "127.0.0.1",
        port,
        user: agent.wallet,
        database: providerId,
        password: await agent.token(),
      });
      client.on("error", () => {});
      await expect(client.connect()).rejects.toMatchObject({ code: "28000" });
    });

    it("refused in plain text, stops being read and is closed within seconds though it keeps writing", async () => {
      const agent = await fundedTestAgent(gateway, providerId, FUNDS);
      const socket = tcpConnect({ host: "127.0.0.1", port, allowHalfOpen: true });
      await new Promise((resolve) => socket.once("connect", resolve));
      const conn = wire(socket);
      socket.write(encodeStartupMessage({ user: agent.wallet, database: providerId }));
      expect((await conn.frame()).code).toBe("E");
      const proxySide = accepted.get(socket.localPort!)!;
      const readAtRefusal = proxySide.bytesRead;
      // A client that keeps its side open and writes on: 1 MiB queries for as long as the proxy takes them.
      const query = encodeQuery(`SELECT '${"x".repeat(1_048_000)}'`);
      const closed = new Promise<void>((resolve) => socket.once("close", () => resolve()));
      let sent = 0;
      const started = Date.now();
      while (!socket.destroyed && sent < 200 * 1_048_576 && Date.now() - started < 10_000) {
        sent += query.length;
        if (!socket.write(query)) {
          await Promise.race([new Promise((r) => socket.once("drain", r)), closed, sleep(1000)]);
        }
      }
      await Promise.race([closed, sleep(10_000)]);
      expect(socket.destroyed).toBe(true);
      expect(Date.now() - started).toBeLessThan(5000);
      // What the proxy read after the refusal, whatever the client sent: a little, then nothing.
      const readAfter = proxySide.bytesRead - readAtRefusal;
      console.log(
        `remote client refused in plain text, writing on: ${(sent / 1_048_576).toFixed(0)} MB written, ` +
          `${readAfter} bytes read by the proxy after the refusal, closed after ${Date.now() - started} ms`,
      );
      expect(readAfter).toBeLessThan(1_048_576);
    });

    it("is served over TLS", async () => {
      const agent = await fundedTestAgent(gateway, providerId, FUNDS);
      const client = new pg.Client({
        host: "127.0.0.1",
        port,
        user: agent.wallet,
        database: providerId,
        password: await agent.token(),
        ssl: { rejectUnauthorized: false },
      });
      await client.connect();
      expect((await client.query("SELECT 'remote over TLS' AS via")).rows).toEqual([
        { via: "remote over TLS" },
      ]);
      await client.end();
      await waitForCharges(proxy);
      await expectChargedPerStatement(gateway, agent, providerId, FUNDS, [{ rows: 1 }]);
    });
  });
});
