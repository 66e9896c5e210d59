import fc from "fast-check";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { getBalance } from "../../src/billing/ledger.js";
import { FrontendCode, StartupCode } from "../../src/proxy/message-codes.js";
import {
  encodeFrame,
  encodeQuery,
  encodeStartupMessage,
  encodeSync,
  encodeTerminate,
} from "../../src/proxy/serializer.js";
import type { TestDatabase } from "../support/database.js";
import {
  createProviderDatabase,
  registerPricedProvider,
  startTestGateway,
  type TestGateway,
} from "../support/gateway.js";
import { fundedTestAgent, startTestProxy, type TestAgent, type TestProxy } from "../support/proxy.js";
import { frontend, startupPacket, WireClient } from "../support/wire-client.js";

/*
 * Random client traffic, valid messages and corrupted ones, cut into random pieces and ended in random ways.
 * Properties: the proxy process never throws, everything it sends is well-framed protocol, a healthy session
 * next to the fuzzed ones keeps getting correct answers, and once the fuzzed clients are gone no upstream
 * connection, slot or reservation of theirs remains. Bounded: a fixed number of runs and a time limit each.
 */

const FUZZ_APP = "fuzz-raw";
const RUNS = 80;
const TIME_LIMIT_MS = 20_000;

let gateway: TestGateway;
let proxy: TestProxy;
let providerDb: TestDatabase;
let providerId: string;
let observer: pg.Client;
let healthy: pg.Client;
let fuzzAgent: TestAgent;
let fuzzToken: string;

beforeAll(async () => {
  gateway = await startTestGateway();
  proxy = await startTestProxy(gateway, { startupTimeoutMs: 2000 });
  providerDb = await createProviderDatabase(20);
  ({ providerId } = await registerPricedProvider(gateway, providerDb.url, {
    basePricePer1000Rows: 0.001,
    markupMultiplier: 1,
  }));
  observer = new pg.Client({ connectionString: providerDb.url, application_name: "fuzz-observer" });
  await observer.connect();
  const healthyAgent = await fundedTestAgent(gateway, providerId, 10_000_000n);
  healthy = new pg.Client({
    host: "127.0.0.1",
    port: proxy.port,
    user: healthyAgent.wallet,
    database: providerId,
    password: await healthyAgent.token(),
  });
  await healthy.connect();
  fuzzAgent = await fundedTestAgent(gateway, providerId, 100_000_000n);
  fuzzToken = await fuzzAgent.token();
});
afterAll(async () => {
  await healthy?.end();
  await observer?.end();
  await proxy?.close();
  await gateway?.close();
  await providerDb?.drop();
});

const sql = fc.constantFrom(
  "SELECT 1",
  "SELECT id, name FROM items WHERE id < 5",
  "SELECT g FROM generate_series(1, 3000) g",
  "SELECT pg_sleep(0.05)",
  "SELECT $1::int",
  "UPDATE items SET name = name WHERE id = 1",
  "BEGIN",
  "COMMIT",
  "ROLLBACK",
  "SELEC oops",
  "DROP TABLE items",
  "",
);
const name = fc.constantFrom("", "s1", "p1");
const bytes = (maxLength: number) => fc.uint8Array({ maxLength }).map((a) => Buffer.from(a));

/** One client message: mostly well-formed, some with a random type, body or length word. */
const message: fc.Arbitrary<Buffer> = fc.oneof(
  { weight: 3, arbitrary: sql.map((q) => encodeQuery(q)) },
  { weight: 2, arbitrary: fc.tuple(name, sql).map(([n, q]) => frontend.parse(n, q)) },
  {
    weight: 2,
    arbitrary: fc
      .tuple(name, name, fc.array(fc.option(fc.constantFrom("1", "x")), { maxLength: 2 }))
      .map(([p, s, v]) => frontend.bind(p, s, v)),
  },
  {
    weight: 2,
    arbitrary: fc.tuple(name, fc.integer({ min: -1, max: 3 })).map(([p, n]) => frontend.execute(p, n)),
  },
  { weight: 3, arbitrary: fc.constant(encodeSync()) },
  {
    weight: 1,
    arbitrary: fc.tuple(fc.constantFrom<"S" | "P">("S", "P"), name).map(([k, n]) => frontend.describe(k, n)),
  },
  {
    weight: 1,
    arbitrary: fc.tuple(fc.constantFrom<"S" | "P">("S", "P"), name).map(([k, n]) => frontend.close(k, n)),
  },
  { weight: 1, arbitrary: fc.constant(frontend.flush()) },
  {
    weight: 1,
    arbitrary: fc.constantFrom(frontend.copyData("1\tx\n"), frontend.copyDone(), frontend.copyFail("no")),
  },
  { weight: 1, arbitrary: fc.constant(frontend.functionCall(1299)) },
  { weight: 1, arbitrary: fc.constant(encodeTerminate()) },
  { weight: 1, arbitrary: fc.constant(encodeFrame(FrontendCode.PasswordMessage, Buffer.from("x\0"))) },
  // A known type with a random body, or a random type byte.
  {
    weight: 2,
    arbitrary: fc
      .tuple(fc.constantFrom(..."QPBDECSHXdcfFp"), bytes(24))
      .map(([t, b]) => encodeFrame(t.charCodeAt(0), b)),
  },
  {
    weight: 1,
    arbitrary: fc.tuple(fc.integer({ min: 0, max: 255 }), bytes(16)).map(([t, b]) => encodeFrame(t, b)),
  },
  // A length word that lies: below 4, huge, negative, or just wrong.
  {
    weight: 2,
    arbitrary: fc
      .tuple(
        fc.constantFrom(..."QPBESd"),
        fc.oneof(fc.integer({ min: -5, max: 3 }), fc.constant(0x7fffffff), fc.integer({ min: 4, max: 200 })),
        bytes(32),
      )
      .map(([t, length, body]) => {
        const header = Buffer.alloc(5);
        header[0] = t.charCodeAt(0);
        header.writeInt32BE(length, 1);
        return Buffer.concat([header, body]);
      }),
  },
  { weight: 1, arbitrary: bytes(40) },
);

/** How the client ends: vanishes at once, half-closes, or reads for a while first. */
const ending = fc.constantFrom("destroy", "end", "linger");

interface Script {
  messages: Buffer[];
  /** Flip one byte of the whole stream (index as a fraction of its length), or none. */
  flip: number | null;
  /** Keep only this fraction of the stream (1 = all). */
  keep: number;
  /** Chunk boundaries, as fractions of the stream. */
  cuts: number[];
  ending: "destroy" | "end" | "linger";
}

const script: fc.Arbitrary<Script> = fc.record({
  messages: fc.array(message, { minLength: 1, maxLength: 12 }),
  flip: fc.option(fc.double({ min: 0, max: 1, noNaN: true, maxExcluded: true })),
  keep: fc.oneof(fc.constant(1), fc.double({ min: 0, max: 1, noNaN: true })),
  cuts: fc.array(fc.double({ min: 0, max: 1, noNaN: true }), { maxLength: 4 }),
  ending,
});

function streamOf(s: Script): Buffer[] {
  const all = Buffer.concat(s.messages);
  if (s.flip !== null && all.length > 0) all[Math.floor(s.flip * all.length)]! ^= 0xff;
  const kept = all.subarray(0, Math.ceil(s.keep * all.length));
  const cuts = [...new Set(s.cuts.map((c) => Math.floor(c * kept.length)))].sort((a, b) => a - b);
  const chunks: Buffer[] = [];
  let from = 0;
  for (const cut of [...cuts, kept.length]) {
    if (cut > from) chunks.push(kept.subarray(from, cut));
    from = Math.max(from, cut);
  }
  return chunks;
}

async function play(client: WireClient, chunks: Buffer[], how: Script["ending"]): Promise<void> {
  for (const chunk of chunks) {
    client.send(chunk);
    await new Promise((r) => setImmediate(r));
  }
  if (how === "destroy") client.destroy();
  else if (how === "end") client.socket.end();
  else await Promise.race([client.closed, new Promise((r) => setTimeout(r, 150))]);
  client.destroy();
}

async function eventually(check: () => Promise<void>, timeoutMs = 8000): Promise<void> {
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

async function expectHealthyAndNoLeaks(): Promise<void> {
  expect((await healthy.query("SELECT count(*)::int AS n FROM items")).rows).toEqual([{ n: 20 }]);
  await eventually(async () => {
    const { rows } = await observer.query(
      "SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = $1 AND application_name = $2",
      [providerDb.name, FUZZ_APP],
    );
    expect(rows[0].n).toBe(0);
    expect(proxy.ctx.slots.inUse(providerId)).toBe(1); // the healthy session's
    await Promise.all(proxy.ctx.releases);
    expect((await getBalance(gateway.ctx.db, fuzzAgent.wallet, providerId)).reservedMicro).toBe(0n);
  });
}

describe("fuzzed clients", () => {
  it("after authentication: the proxy survives any message stream and leaks nothing", async () => {
    await fc.assert(
      fc.asyncProperty(script, async (s) => {
        const client = await WireClient.connect(proxy.port);
        await client.login(
          { user: fuzzAgent.wallet, database: providerId, application_name: FUZZ_APP },
          fuzzToken,
        );
        await play(client, streamOf(s), s.ending);
        expect(client.malformed).toBeUndefined();
      }),
      { numRuns: RUNS, interruptAfterTimeLimit: TIME_LIMIT_MS, markInterruptAsFailure: false },
    );
    await expectHealthyAndNoLeaks();
  });

  it("during startup: the proxy survives any packet stream and leaks nothing", async () => {
    const valid = () =>
      encodeStartupMessage({ user: fuzzAgent.wallet, database: providerId, application_name: FUZZ_APP });
    const password = encodeFrame(FrontendCode.PasswordMessage, Buffer.from(`${fuzzToken}\0`));
    const startupMessage = fc.oneof(
      fc.constant(startupPacket(StartupCode.SSLRequest)),
      fc.constant(startupPacket(StartupCode.GSSENCRequest)),
      fc.constant(startupPacket(StartupCode.CancelRequest, Buffer.from([0, 0, 0, 1, 0, 0, 0, 2]))),
      fc.constant(valid()),
      fc.constant(password),
      fc
        .tuple(fc.integer({ min: -10, max: 20_000 }), fc.integer(), bytes(24))
        .map(([length, code, body]) => startupPacket(code, body, length)),
      fc
        .tuple(fc.integer({ min: 0, max: 0xffff }), fc.integer({ min: 0, max: 0xffff }))
        .map(([major, minor]) => encodeStartupMessage({ user: "x" }, (major << 16) | minor)),
      bytes(40),
    );
    const startupScript = fc.record({
      messages: fc.array(startupMessage, { minLength: 1, maxLength: 5 }),
      flip: fc.option(fc.double({ min: 0, max: 1, noNaN: true, maxExcluded: true })),
      keep: fc.oneof(fc.constant(1), fc.double({ min: 0, max: 1, noNaN: true })),
      cuts: fc.array(fc.double({ min: 0, max: 1, noNaN: true }), { maxLength: 4 }),
      ending,
    });
    await fc.assert(
      fc.asyncProperty(startupScript, async (s) => {
        const client = await WireClient.connect(proxy.port);
        await play(client, streamOf(s), s.ending);
        // Answers to SSLRequest/GSSENCRequest are single bytes; the rest must parse only when none was sent.
        if (
          !s.messages.some(
            (m) =>
              m.length === 8 &&
              [StartupCode.SSLRequest, StartupCode.GSSENCRequest].includes(m.readInt32BE(4)),
          )
        ) {
          expect(client.malformed).toBeUndefined();
        }
      }),
      { numRuns: RUNS * 2, interruptAfterTimeLimit: TIME_LIMIT_MS, markInterruptAsFailure: false },
    );
    await expectHealthyAndNoLeaks();
  });
});
