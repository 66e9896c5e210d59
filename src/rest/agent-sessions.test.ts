import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { TestGateway } from "../../test/support/gateway.js";
import {
  fundedTestAgent,
  type ProxiedProvider,
  startProxiedProvider,
  type TestProxy,
} from "../../test/support/proxy.js";
import { listLedgerEntries } from "../billing/ledger.js";
import { SqlState } from "../db/sql-state.js";
import { AgentSessions } from "./agent-sessions.js";

let provider: ProxiedProvider;
let gateway: TestGateway;
let proxy: TestProxy;
let providerId: string;

beforeAll(async () => {
  provider = await startProxiedProvider();
  ({ gateway, proxy, providerId } = provider);
});
afterAll(() => provider?.close());

function agentSessions(idleMs = 60_000, maxAgeMs = 60_000): AgentSessions {
  return new AgentSessions({
    connect: (agent) => proxy.connectInProcess(agent),
    perAgent: 3,
    idleMs,
    maxAgeMs,
    settings: { "pgtoll.synchronous_charges": "on" },
  });
}

describe("an agent's sessions", () => {
  it("spread an agent's queries over at most its number of sessions, pipelined", async () => {
    const sessions = agentSessions();
    const agent = await fundedTestAgent(gateway, providerId, 10_000_000n);
    try {
      const answers = await Promise.all(
        Array.from({ length: 30 }, async (_, i) => {
          const session = await sessions.session({ wallet: agent.wallet, providerId });
          return session.query("SELECT id FROM items WHERE id = $1", [i + 1]);
        }),
      );
      expect(answers.map((answer) => answer.statements[0]!.rows[0])).toEqual(
        Array.from({ length: 30 }, (_, i) => ({ id: i + 1 })),
      );
      expect(sessions.size({ wallet: agent.wallet, providerId })).toBe(3);
      // One after another, the idle session is taken again: no more are opened.
      for (let i = 0; i < 5; i++)
        await (await sessions.session({ wallet: agent.wallet, providerId })).query("SELECT 1", []);
      expect(sessions.size({ wallet: agent.wallet, providerId })).toBe(3);
    } finally {
      sessions.closeAll();
    }
  });

  it("closes idle sessions and replaces ended ones", async () => {
    const sessions = agentSessions(100);
    const agent = await fundedTestAgent(gateway, providerId, 10_000_000n);
    try {
      const first = await sessions.session({ wallet: agent.wallet, providerId });
      await first.query("SELECT 1", []);
      expect(sessions.size({ wallet: agent.wallet, providerId })).toBe(1);
      await expect.poll(() => sessions.size({ wallet: agent.wallet, providerId }), { timeout: 2000 }).toBe(0);
      expect(first.ended).toBe(true);
      const second = await sessions.session({ wallet: agent.wallet, providerId });
      expect(second).not.toBe(first);
      second.close();
      const third = await sessions.session({ wallet: agent.wallet, providerId });
      expect(third).not.toBe(second);
      expect((await third.query("SELECT 2 AS two", [])).statements[0]!.rows).toEqual([{ two: 2 }]);
    } finally {
      sessions.closeAll();
    }
  });

  it("count a session idle from its last answer, not from when it was handed out", async () => {
    const sessions = agentSessions(300);
    const agent = await fundedTestAgent(gateway, providerId, 10_000_000n);
    const key = { wallet: agent.wallet, providerId };
    try {
      const first = await sessions.session(key);
      await first.query("SELECT pg_sleep(0.8)", []);
      // Handed out 800 ms ago, idle for less than its 300 ms: kept for the agent's next query.
      await new Promise((resolve) => setTimeout(resolve, 200));
      expect(await sessions.session(key)).toBe(first);
    } finally {
      sessions.closeAll();
    }
  });

  it("replace a session past its age once its queries are answered", async () => {
    const sessions = agentSessions(60_000, 200);
    const agent = await fundedTestAgent(gateway, providerId, 10_000_000n);
    const key = { wallet: agent.wallet, providerId };
    try {
      const first = await sessions.session(key);
      const running = first.query("SELECT pg_sleep(0.4) AS slept", []);
      await new Promise((resolve) => setTimeout(resolve, 250));
      const second = await sessions.session(key);
      expect(second).not.toBe(first);
      // The old session finishes what it was given, then closes.
      expect((await running).statements[0]!.rows).toEqual([{ slept: "" }]);
      await expect.poll(() => first.ended, { timeout: 2000 }).toBe(true);
      expect((await second.query("SELECT 1 AS one", [])).statements[0]!.rows).toEqual([{ one: 1 }]);
    } finally {
      sessions.closeAll();
    }
  });

  it("of REST write each query as one entry with its SQL, however long it runs", async () => {
    const sessions = new AgentSessions({
      connect: (agent) => proxy.connectInProcess({ ...agent, surface: "rest" }),
      perAgent: 1,
      idleMs: 60_000,
      maxAgeMs: 60_000,
      settings: { "pgtoll.synchronous_charges": "on" },
    });
    const agent = await fundedTestAgent(gateway, providerId, 10_000_000n);
    try {
      const session = await sessions.session({ wallet: agent.wallet, providerId });
      // The second statement's first rows are more than PostgreSQL buffers, so the first statement's end arrives
      // (and is charged) before the second sleeps past the window clock's tick (250 ms here): still one entry.
      const several =
        "SELECT id FROM items WHERE id <= 3; SELECT repeat('x', 100), CASE WHEN g = 150 THEN pg_sleep(0.6) END FROM generate_series(1, 300) g";
      await session.query(several);
      await session.query("SELECT id FROM items WHERE id = $1", [5]);
      // Synchronous charges: each entry was written before its answer.
      const entries = await listLedgerEntries(gateway.ctx.db, agent.wallet, { providerId, limit: 10 });
      const queries = entries.filter((entry) => entry.type === "query").reverse();
      expect(queries.map((entry) => [entry.amountMicro, entry.metadata])).toEqual([
        [
          -303_000n,
          { sql: several, fingerprint: expect.any(String), rowCount: 303, source: "rest", statements: 2 },
        ],
        [
          -1000n,
          {
            sql: "SELECT id FROM items WHERE id = $1",
            fingerprint: expect.any(String),
            rowCount: 1,
            source: "rest",
          },
        ],
      ]);
    } finally {
      sessions.closeAll();
    }
  });

  it("rejects with the proxy's refusal when the agent cannot pay, and keeps nothing of it", async () => {
    const sessions = agentSessions();
    const broke = await fundedTestAgent(gateway, providerId, 0n);
    try {
      await expect(sessions.session({ wallet: broke.wallet, providerId })).rejects.toMatchObject({
        code: SqlState.insufficientFunds,
      });
      expect(sessions.size({ wallet: broke.wallet, providerId })).toBe(0);
    } finally {
      sessions.closeAll();
    }
  });
});
