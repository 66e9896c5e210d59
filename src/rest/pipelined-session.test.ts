import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { TestGateway } from "../../test/support/gateway.js";
import {
  fundedTestAgent,
  type ProxiedProvider,
  startProxiedProvider,
  type TestAgent,
  type TestProxy,
} from "../../test/support/proxy.js";
import { formatMicro } from "../billing/money.js";
import { SqlState } from "../db/sql-state.js";
import { InProcessSocket } from "../net/in-process-socket.js";
import {
  encodeAuthenticationOk,
  encodeBackendKeyData,
  encodeCommandComplete,
  encodeDataRow,
  encodeReadyForQuery,
  encodeRowDescription,
} from "../proxy/serializer.js";
import {
  PipelinedSession,
  type QueryAnswer,
  QueryFailedError,
  SessionEndedError,
} from "./pipelined-session.js";

let provider: ProxiedProvider;
let gateway: TestGateway;
let proxy: TestProxy;
let providerId: string;

beforeAll(async () => {
  provider = await startProxiedProvider();
  ({ gateway, proxy, providerId } = provider);
});
afterAll(() => provider?.close());

/** A session of `agent`'s, opened on an in-process connection the proxy serves as that agent. */
function openSession(agent: TestAgent, settings?: Record<string, string>): Promise<PipelinedSession> {
  const authenticated = { wallet: agent.wallet, providerId };
  return PipelinedSession.open(proxy.connectInProcess(authenticated), {
    user: agent.wallet,
    database: providerId,
    ...(settings ? { settings } : {}),
  });
}

/** Runs `use` on a session of a new agent holding 100 USDC, opened with `settings`, and closes it. */
async function withSession(
  use: (session: PipelinedSession) => Promise<void>,
  settings?: Record<string, string>,
): Promise<void> {
  const session = await openSession(await fundedTestAgent(gateway, providerId, 100_000_000n), settings);
  try {
    await use(session);
  } finally {
    session.close();
  }
}

describe("a pipelined session through the proxy", () => {
  it("answers queries written at once, in order, as node-postgres reads them", async () => {
    const agent = await fundedTestAgent(gateway, providerId, 10_000_000n);
    const session = await openSession(agent);
    const reference = new pg.Client({
      stream: () => proxy.connectInProcess({ wallet: agent.wallet, providerId }),
      user: agent.wallet,
      database: providerId,
    });
    await reference.connect();
    try {
      const typed =
        "SELECT $1::int AS i, $2::text AS t, $3::int[] AS a, $4::jsonb AS j, $5::text AS n, " +
        "1::int8 AS big, 1.50::numeric AS num, '2026-01-02'::date AS d, '{1,2}'::int[] AS arr, true AS b";
      const values = [7, "é'x", [1, 2], { k: [1, "v"] }, null];
      const answers = Array.from({ length: 40 }, (_, i) =>
        session.query("SELECT id FROM items WHERE id = $1", [i + 1]),
      );
      const typedAnswer = session.query(typed, values);
      const several = session.query("SELECT 1 AS one; SELECT id FROM items WHERE id <= 2 ORDER BY id");
      expect(session.pendingQueries).toBe(42);
      for (const [i, answer] of answers.entries())
        expect((await answer).statements).toEqual([
          { command: "SELECT", rowCount: 1, rows: [{ id: i + 1 }], rowBytes: String(i + 1).length },
        ]);
      const [expected] = (await reference.query(typed, values)).rows;
      expect((await typedAnswer).statements[0]!.rows).toEqual([expected]);
      expect((await several).statements.map((statement) => statement.rows)).toEqual([
        [{ one: 1 }],
        [{ id: 1 }, { id: 2 }],
      ]);
      expect(session.pendingQueries).toBe(0);
    } finally {
      session.close();
      await reference.end();
    }
  });

  it("rejects the query that failed with the server's error, and goes on with the ones behind it", async () => {
    await withSession(async (session) => {
      const before = session.query("SELECT 1 AS one", []);
      const denied = session.query("SELECT usename FROM pg_shadow", []);
      // The same text again before the first Parse of it was answered: refused the same way, not as unknown.
      const deniedAgain = session.query("SELECT usename FROM pg_shadow", []);
      const broken = session.query("SELECT 1; SELECT 1/0; SELECT 2");
      const after = session.query("SELECT 2 AS two", []);
      expect((await before).statements[0]!.rows).toEqual([{ one: 1 }]);
      await expect(denied).rejects.toMatchObject({ name: "QueryFailedError", code: "42501" });
      await expect(deniedAgain).rejects.toMatchObject({ name: "QueryFailedError", code: "42501" });
      const error = await broken.catch((failure: unknown) => failure);
      expect(error).toBeInstanceOf(QueryFailedError);
      expect((error as QueryFailedError).code).toBe("22012");
      // What completed before the error is in its answer; nothing after it ran.
      expect((error as QueryFailedError).answer.statements.map((statement) => statement.rows)).toEqual([
        [{ "?column?": 1 }],
      ]);
      expect((await after).statements[0]!.rows).toEqual([{ two: 2 }]);
    });
  });

  it("keeps texts prepared, and parses again what failed, was closed for room or was deallocated", async () => {
    await withSession(async (session) => {
      const idOf = (n: number) => session.query(`SELECT id, ${n} AS n FROM items WHERE id = $1`, [1]);
      // More texts than the session keeps: the oldest are closed, and parsed again when they come back.
      const first = await Promise.all(Array.from({ length: 130 }, (_, n) => idOf(n)));
      expect(first.map((answer) => answer.statements[0]!.rows[0])).toEqual(
        Array.from({ length: 130 }, (_, n) => ({ id: 1, n })),
      );
      expect((await idOf(0)).statements[0]!.rows).toEqual([{ id: 1, n: 0 }]);
      // A text whose Parse failed is not taken for prepared: it fails the same way again, not as unknown.
      const broken = "SELECT $1::no_such_type AS v";
      await expect(session.query(broken, [1])).rejects.toMatchObject({ code: "42704" });
      await expect(session.query(broken, [1])).rejects.toMatchObject({ code: "42704" });
      // Deallocated by a query of the agent's: the next use fails once, the ones after parse again.
      await session.query("DEALLOCATE ALL");
      await expect(idOf(129)).rejects.toMatchObject({ code: "26000" });
      expect((await idOf(129)).statements[0]!.rows).toEqual([{ id: 1, n: 129 }]);
    });
  });

  it("keeps the rows a statement delivered before a budget ended it, each pipelined query on its own budget", async () => {
    await withSession(
      async (session) => {
        const sql = "SELECT id FROM items ORDER BY id";
        const cut = await Promise.all(
          [1, 2, 3].map((n) => session.query(`${sql} /* ${n} */`, []).catch((error: unknown) => error)),
        );
        for (const error of cut) {
          expect(error).toBeInstanceOf(QueryFailedError);
          expect((error as QueryFailedError).code).toBe("PT422");
          // 1 USDC per 1000 rows: the budget pays for ten rows, and those ten were delivered.
          expect((error as QueryFailedError).answer.interrupted?.rows).toEqual(
            Array.from({ length: 10 }, (_, i) => ({ id: i + 1 })),
          );
        }
      },
      { "pgtoll.max_query_cost": "0.01" },
    );
  });

  it("reads what a query cost with a SHOW written right behind it", async () => {
    await withSession(async (session) => {
      const costOf = async (answer: Promise<QueryAnswer>) =>
        JSON.parse(String((await answer).statements[0]!.rows[0]!["pgtoll.last_query_cost"]));
      const reads = [3, 7, 5].map((rows) => {
        const result = session.query("SELECT id FROM items ORDER BY id LIMIT $1", [rows]);
        return [result, costOf(session.query("SHOW pgtoll.last_query_cost"))] as const;
      });
      for (const [n, [result, cost]] of reads.entries()) {
        const rows = [3, 7, 5][n]!;
        expect((await result).statements[0]!.rows).toHaveLength(rows);
        // 1 USDC per 1000 rows.
        expect(await cost).toMatchObject({ statements: 1, rows, cost: formatMicro(BigInt(rows) * 1000n) });
      }
    });
  });

  it("keeps the rows an error cut off, and serves the next query", async () => {
    await withSession(async (session) => {
      await session.query("SET pgtoll.max_result_rows = 20");
      const cut = session.query("SELECT g FROM generate_series(1, 10000000) g", []);
      const next = session.query("SELECT 4 AS four", []);
      const error = await cut.catch((failure: unknown) => failure);
      expect(error).toBeInstanceOf(QueryFailedError);
      const { code, answer } = error as QueryFailedError;
      expect(code).toBe(SqlState.programLimitExceeded);
      expect(answer.interrupted?.rows.map((row) => row.g)).toEqual(
        Array.from({ length: 20 }, (_, i) => i + 1),
      );
      expect((await next).statements[0]!.rows).toEqual([{ four: 4 }]);
    });
  });

  it("rejects the queries not yet answered when the session ends", async () => {
    const agent = await fundedTestAgent(gateway, providerId, 10_000_000n);
    const session = await openSession(agent);
    const waiting = session.query("SELECT pg_sleep(5)", []);
    session.close();
    await expect(waiting).rejects.toBeInstanceOf(SessionEndedError);
    await expect(session.query("SELECT 1", [])).rejects.toBeInstanceOf(SessionEndedError);
    expect(session.ended).toBe(true);
  });

  it("fails to open where the server asks for a password or refuses the startup", async () => {
    const agent = await fundedTestAgent(gateway, providerId, 10_000_000n);
    await expect(
      PipelinedSession.open(proxy.connectInProcess(), { user: agent.wallet, database: providerId }),
    ).rejects.toThrow(/asked for a password/);
    const other = await fundedTestAgent(gateway, providerId, 10_000_000n);
    await expect(
      PipelinedSession.open(proxy.connectInProcess({ wallet: agent.wallet, providerId }), {
        user: other.wallet,
        database: providerId,
      }),
    ).rejects.toMatchObject({ code: "28000" });
  });
});

describe("a pipelined session's reading", () => {
  it("reads answers however the bytes are split", async () => {
    const [client, server] = InProcessSocket.pair();
    server.on("data", () => {});
    const opening = PipelinedSession.open(client, { user: "u", database: "d" });
    const started = Buffer.concat([
      encodeAuthenticationOk(),
      encodeBackendKeyData(1, 2),
      encodeReadyForQuery("I"),
    ]);
    const answered = Buffer.concat([
      encodeRowDescription([
        { name: "id", typeOid: 23 },
        { name: "name", typeOid: 25 },
      ]),
      encodeDataRow(["1", "ä"]),
      encodeDataRow(["2", null]),
      encodeCommandComplete("SELECT 2"),
      encodeReadyForQuery("I"),
    ]);
    // One byte at a time: every message straddles chunks, a UTF-8 character too.
    for (const byte of started) server.write(Buffer.from([byte]));
    const session = await opening;
    const answer = session.query("SELECT id, name FROM t");
    for (const byte of answered) server.write(Buffer.from([byte]));
    expect((await answer).statements).toEqual([
      {
        command: "SELECT",
        rowCount: 2,
        rows: [
          { id: 1, name: "ä" },
          { id: 2, name: null },
        ],
        rowBytes: 4,
      },
    ]);
    session.close();
  });
});
