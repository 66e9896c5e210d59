import { execFile } from "node:child_process";
import { promisify } from "node:util";
import postgres from "postgres";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ChargeWriter } from "../../src/billing/charge-writer.js";
import { getBalance, listLedgerEntries, type Queryable } from "../../src/billing/ledger.js";
import { formatMicro, parseMicro } from "../../src/billing/money.js";
import { WindowClock } from "../../src/billing/window-clock.js";
import type { ProxyContext } from "../../src/proxy/client-session.js";
import type { TestDatabase } from "../support/database.js";
import {
  createProviderDatabase,
  registerPricedProvider,
  startTestGateway,
  type TestGateway,
} from "../support/gateway.js";
import { connectAgent, fundedTestAgent, startTestProxy, type TestProxy } from "../support/proxy.js";
import { chargeOutage, watchedLedger } from "../support/watched-ledger.js";

const run = promisify(execFile);

let gateway: TestGateway;
let proxy: TestProxy;
let providerDb: TestDatabase;
let providerId: string;
let providerWallet: string;
/** Bytes the proxy has read from providers' databases: unchanged when the proxy answered alone. */
function bytesFromUpstream(): number {
  return proxy.ctx.metrics.tally.bytesFromUpstream;
}

/** The lines psql prints (unaligned, tuples only) for `commands`, each a `-c`, run as `agent` through `on`. */
async function psqlLines(
  on: Pick<TestProxy, "port">,
  agent: Awaited<ReturnType<typeof fundedTestAgent>>,
  commands: string[],
): Promise<string[]> {
  const { stdout } = await run(
    "psql",
    [
      "-X",
      "-A",
      "-t",
      ...commands.flatMap((command) => ["-c", command]),
      `postgresql://${agent.wallet}@127.0.0.1:${on.port}/${providerId}`,
    ],
    { env: { ...process.env, PGPASSWORD: await agent.token() } },
  );
  return stdout.trim().split("\n");
}

/**
 * One postgres.js session of `agent` through `on`, with synchronous charges: it pipelines the queries it is
 * given, and reads no catalog types of its own (so every charge is the test's).
 */
async function pipeliningSession(
  on: Pick<TestProxy, "port">,
  agent: Awaited<ReturnType<typeof fundedTestAgent>>,
): Promise<postgres.Sql> {
  return postgres({
    host: "127.0.0.1",
    port: on.port,
    user: agent.wallet,
    database: providerId,
    password: await agent.token(),
    max: 1,
    fetch_types: false,
    connection: { "pgtoll.synchronous_charges": "on" },
    onnotice: () => {},
  });
}

beforeAll(async () => {
  gateway = await startTestGateway();
  proxy = await startTestProxy(gateway);
  providerDb = await createProviderDatabase(300);
  ({ providerId, walletAddress: providerWallet } = await registerPricedProvider(gateway, providerDb.url, {
    basePricePer1000Rows: 1,
    markupMultiplier: 1.5,
  }));
});
afterAll(async () => {
  await proxy?.close();
  await gateway?.close();
  await providerDb?.drop();
});

describe("SHOW pgtoll.*: the agent asks the proxy what it spends", () => {
  it("answers balance, session cost and price in the simple protocol, free and without the provider's database", async () => {
    const agent = await fundedTestAgent(gateway, providerId, 1_000_000n);
    const client = await connectAgent(proxy, agent, providerId);
    try {
      expect((await client.query("SHOW pgtoll.session_cost")).rows).toEqual([
        { "pgtoll.session_cost": "0.000000" },
      ]);
      await client.query("SELECT id FROM items WHERE id <= 10");
      await client.query("SELECT id FROM items WHERE id <= 4");
      // 14 rows at 1 USDC per 1000 rows with a markup of 1.5: 1500 micro-USDC a row.
      const before = bytesFromUpstream();
      const cost = await client.query("SHOW pgtoll.session_cost");
      expect(cost.rows).toEqual([{ "pgtoll.session_cost": "0.021000" }]);
      expect(cost.command).toBe("SHOW");
      expect((await client.query("show PGTOLL.PRICE")).rows).toEqual([{ "pgtoll.price": "1.500000" }]);
      const depositAddress = await client.query("SHOW pgtoll.deposit_address");
      expect(depositAddress.rows[0]["pgtoll.deposit_address"]).toBe(providerWallet);
      // The balance has this session's open window written first: it matches the ledger exactly.
      const balance = await client.query("SHOW pgtoll.balance");
      expect(balance.rows).toEqual([{ "pgtoll.balance": "0.979000" }]);
      expect(await getBalance(gateway.ctx.db, agent.wallet, providerId)).toMatchObject({
        balanceMicro: 979_000n,
      });
      expect(bytesFromUpstream()).toBe(before);
      // Asking cost nothing.
      expect((await client.query("SHOW pgtoll.session_cost")).rows[0]["pgtoll.session_cost"]).toBe(
        "0.021000",
      );
    } finally {
      await client.end();
    }
  });

  it("answers an agent whose balance is spent, inside a transaction block, keeping the block's status", async () => {
    const agent = await fundedTestAgent(gateway, providerId, 1500n); // one row
    const client = await connectAgent(proxy, agent, providerId);
    try {
      await client.query("BEGIN");
      expect((await client.query("SELECT id FROM items WHERE id = 1")).rows).toEqual([{ id: 1 }]);
      expect((await client.query("SHOW pgtoll.balance")).rows).toEqual([{ "pgtoll.balance": "0.000000" }]);
      await expect(client.query("SELECT id FROM items WHERE id <= 3")).rejects.toMatchObject({
        code: "PT402",
      });
      await client.query("ROLLBACK");
      expect((await client.query("SHOW pgtoll.session_cost")).rows).toEqual([
        { "pgtoll.session_cost": "0.001500" },
      ]);
    } finally {
      await client.end();
    }
  });

  it("answers in the extended protocol: unnamed, named and prepared once then reused, with node-postgres", async () => {
    const agent = await fundedTestAgent(gateway, providerId, 1_000_000n);
    const client = await connectAgent(proxy, agent, providerId);
    try {
      await client.query("SELECT id FROM items WHERE id <= 2");
      expect((await client.query({ text: "SHOW pgtoll.session_cost", values: [] })).rows).toEqual([
        { "pgtoll.session_cost": "0.003000" },
      ]);
      const named = { name: "spent", text: "SHOW pgtoll.session_cost" };
      expect((await client.query(named)).rows[0]["pgtoll.session_cost"]).toBe("0.003000");
      await client.query({ text: "SELECT id FROM items WHERE id <= $1", values: [2] });
      expect((await client.query(named)).rows[0]["pgtoll.session_cost"]).toBe("0.006000");
      expect((await client.query({ text: "SHOW pgtoll.balance", values: [] })).rows).toEqual([
        { "pgtoll.balance": "0.994000" },
      ]);
    } finally {
      await client.end();
    }
  });

  it("keeps its place among pipelined statements (postgres.js pipelines and prepares)", async () => {
    const agent = await fundedTestAgent(gateway, providerId, 1_000_000n);
    const sql = postgres({
      host: "127.0.0.1",
      port: proxy.port,
      user: agent.wallet,
      database: providerId,
      password: await agent.token(),
      max: 1,
      onnotice: () => {},
    });
    const micro = (rows: Record<string, string>[]) =>
      parseMicro(rows[0]?.["pgtoll.session_cost"] ?? "") ?? -1n;
    try {
      // postgres.js reads the catalog's types when it connects: that is charged too, so costs are counted from here.
      const base = micro(await sql`SHOW pgtoll.session_cost`);
      const [a, shown, b, again] = await Promise.all([
        sql`SELECT id FROM items WHERE id <= ${4}`,
        sql`SHOW pgtoll.session_cost`,
        sql`SELECT id FROM items WHERE id <= ${2}`,
        sql.unsafe("SHOW pgtoll.session_cost"),
      ]);
      expect(a).toHaveLength(4);
      expect(b).toHaveLength(2);
      expect(micro(shown) - base).toBe(6000n);
      expect(micro(again) - base).toBe(9000n);
    } finally {
      await sql.end();
    }
  });

  it("refuses an unknown pgtoll setting as PostgreSQL would, and one mixed with other statements", async () => {
    const agent = await fundedTestAgent(gateway, providerId, 1_000_000n);
    const client = await connectAgent(proxy, agent, providerId);
    try {
      await expect(client.query("SHOW pgtoll.nothing")).rejects.toMatchObject({
        code: "42704",
        message: 'unrecognized configuration parameter "pgtoll.nothing"',
      });
      await expect(client.query("SELECT 1; SHOW pgtoll.balance")).rejects.toMatchObject({ code: "0A000" });
      await expect(client.query({ text: "SHOW pgtoll.nothing", values: [] })).rejects.toMatchObject({
        code: "42704",
      });
      expect((await client.query("SHOW pgtoll.price")).rows).toEqual([{ "pgtoll.price": "1.500000" }]);
    } finally {
      await client.end();
    }
  });

  it("works from psql, the way an agent with only a SQL tool asks", async () => {
    const agent = await fundedTestAgent(gateway, providerId, 2_000_000n);
    const lines = await psqlLines(proxy, agent, [
      "SELECT id FROM items WHERE id <= 3",
      "SHOW pgtoll.session_cost",
      "SHOW pgtoll.balance",
    ]);
    expect(lines).toEqual(["1", "2", "3", "0.004500", "1.995500"]);
  });
});

describe("pgtoll.synchronous_charges: each answer after its charge is in the ledger", () => {
  /** A proxy whose charge windows close only every minute: what is written before an answer was written for it. */
  let slowClockProxy: TestProxy;
  beforeAll(async () => {
    slowClockProxy = await slowClockProxyOver(gateway.ctx.db);
  });
  afterAll(async () => {
    await slowClockProxy?.close();
  });

  /**
   * A proxy whose charge windows close only every minute and whose charges go through `ledger` (a test may stall
   * or fail them there); `overrides` for the rest.
   */
  function slowClockProxyOver(ledger: Queryable, overrides: Partial<ProxyContext> = {}): Promise<TestProxy> {
    const chargeWriter = new ChargeWriter(ledger, { ttlSeconds: 300 });
    return startTestProxy(gateway, {
      metrics: proxy.ctx.metrics,
      chargeWriter,
      windowClock: new WindowClock(60_000, chargeWriter),
      ...overrides,
    });
  }

  async function balanceOf(agent: { wallet: string }): Promise<bigint> {
    return (await getBalance(gateway.ctx.db, agent.wallet, providerId)).balanceMicro;
  }

  it("writes what each query cost before its answer ends, one entry per query, in both protocols", async () => {
    const agent = await fundedTestAgent(gateway, providerId, 1_000_000n);
    const client = await connectAgent(slowClockProxy, agent, providerId, {
      options: "-c pgtoll.synchronous_charges=on",
    });
    try {
      expect((await client.query("SHOW pgtoll.synchronous_charges")).rows).toEqual([
        { "pgtoll.synchronous_charges": "on" },
      ]);
      let spent = 0n;
      for (const [text, values, rows] of [
        ["SELECT id FROM items WHERE id <= 3", undefined, 3],
        ["SELECT id FROM items WHERE id <= $1", [5], 5],
        ["SELECT id FROM items WHERE id <= 1; SELECT id FROM items WHERE id <= 2", undefined, 3],
        ["SELECT id FROM items WHERE id <= $1", [4], 4],
      ] as const) {
        await client.query(text, values ? [...values] : undefined);
        // 1500 micro-USDC a row; in the ledger as the answer arrives, the clock far from closing a window.
        spent += BigInt(rows) * 1500n;
        expect(await balanceOf(agent)).toBe(1_000_000n - spent);
      }
      const entries = (await listLedgerEntries(gateway.ctx.db, agent.wallet, { providerId, limit: 100 }))
        .filter((entry) => entry.type === "query")
        .reverse();
      expect(entries.map((entry) => [entry.amountMicro, entry.metadata.rowCount])).toEqual([
        [-4500n, 3],
        [-7500n, 5],
        [-4500n, 3],
        [-6000n, 4],
      ]);
      // Off again: the charge waits in the session's window, unwritten when the answer comes.
      await client.query("SET pgtoll.synchronous_charges = off");
      await client.query("SELECT id FROM items WHERE id <= 2");
      expect(await balanceOf(agent)).toBe(1_000_000n - spent);
      expect((await client.query("SHOW pgtoll.balance")).rows[0]["pgtoll.balance"]).toBe(
        formatMicro(1_000_000n - spent - 3000n),
      );
    } finally {
      await client.end();
    }
  });

  it("goes on reading a pipelining client's queries while an answer waits for its charge, and answers them in order", async () => {
    const agent = await fundedTestAgent(gateway, providerId, 10_000_000n);
    const sql = await pipeliningSession(slowClockProxy, agent);
    const ledger = await gateway.ctx.db.connect();
    try {
      expect((await sql.unsafe("SELECT id FROM items WHERE id <= 1")).count).toBe(1);
      // The ledger stalls: the agent's balance row is locked, so no charge of it can be written.
      await ledger.query("BEGIN");
      await ledger.query("SELECT 1 FROM balances WHERE agent_wallet = $1 AND provider_id = $2 FOR UPDATE", [
        agent.wallet,
        providerId,
      ]);
      const tally = slowClockProxy.ctx.metrics.tally;
      const relayedBefore = tally.rowsRelayed;
      let answered = 0;
      const queries = [1, 2, 3, 4, 5].map((n) =>
        sql.unsafe(`SELECT id FROM items WHERE id <= ${n}`).then((rows) => {
          answered++;
          return rows.count;
        }),
      );
      const deadline = Date.now() + 5000;
      while (tally.rowsRelayed - relayedBefore < 15 && Date.now() < deadline)
        await new Promise((resolve) => setTimeout(resolve, 10));
      // Every query ran and was metered while the first answer waited for its charge; none was answered.
      expect(tally.rowsRelayed - relayedBefore).toBe(15);
      expect(answered).toBe(0);
      await ledger.query("ROLLBACK");
      expect(await Promise.all(queries)).toEqual([1, 2, 3, 4, 5]);
      const entries = (await listLedgerEntries(gateway.ctx.db, agent.wallet, { providerId, limit: 100 }))
        .filter((entry) => entry.type === "query")
        .reverse();
      expect(entries.map((entry) => entry.metadata.rowCount)).toEqual([1, 1, 2, 3, 4, 5]);
      expect(await balanceOf(agent)).toBe(10_000_000n - 16n * 1500n);
    } finally {
      await ledger.query("ROLLBACK").catch(() => {});
      ledger.release();
      await sql.end();
    }
  });

  it("stops reading the upstream once the answers it holds for a stalled ledger pass 1 MiB", async () => {
    // Only the charges stall: reservations, and so the rows they pay for, go on.
    let gate: Promise<void> | undefined;
    let open = () => {};
    const stalledProxy = await slowClockProxyOver(
      watchedLedger(gateway.ctx.db, (name) => (name === "pgtoll_ledger_charge_batch" ? gate : undefined)),
      // The crash bound (twice this) far above what the test spends: the held answers alone stop the reading.
      { windowMaxCostMicro: 100_000_000n },
    );
    const agent = await fundedTestAgent(gateway, providerId, 100_000_000n);
    const sql = await pipeliningSession(stalledProxy, agent);
    try {
      expect((await sql.unsafe("SELECT id FROM items WHERE id <= 1")).count).toBe(1);
      gate = new Promise<void>((resolve) => (open = resolve));
      const tally = stalledProxy.ctx.metrics.tally;
      const relayedBefore = tally.rowsRelayed;
      // Eight results of 300 rows of 1 000 bytes: 2.4 MB in all, more than a session holds back.
      const queries = Array.from({ length: 8 }, () =>
        sql.unsafe("SELECT repeat('x', 1000) AS v FROM generate_series(1, 300)").then((rows) => rows.count),
      );
      await new Promise((resolve) => setTimeout(resolve, 1000));
      const relayed = tally.rowsRelayed - relayedBefore;
      expect(relayed).toBeGreaterThanOrEqual(600);
      expect(relayed).toBeLessThan(8 * 300);
      gate = undefined;
      open();
      expect(await Promise.all(queries)).toEqual(Array(8).fill(300));
    } finally {
      open();
      await sql.end();
      await stalledProxy.close();
    }
  });

  it("ends an answer whose charge the ledger cannot take with 57P03 after its result, and writes the charge later", async () => {
    const outage = chargeOutage(gateway.ctx.db);
    const outageProxy = await slowClockProxyOver(outage.ledger);
    const agent = await fundedTestAgent(gateway, providerId, 1_000_000n);
    const client = await connectAgent(outageProxy, agent, providerId, {
      options: "-c pgtoll.synchronous_charges=on",
    });
    try {
      expect((await client.query("SELECT id FROM items WHERE id <= 1")).rowCount).toBe(1);
      outage.down = true;
      await expect(client.query("SELECT id FROM items WHERE id <= 2")).rejects.toMatchObject({
        code: "57P03",
        message: expect.stringContaining("this query's result stands, but its charge is not written yet"),
      });
      expect(await balanceOf(agent)).toBe(1_000_000n - 1500n);
      outage.down = false;
      // The session goes on; the charge kept during the outage is written before this answer ends.
      expect((await client.query("SELECT id FROM items WHERE id <= 1")).rowCount).toBe(1);
      expect(await balanceOf(agent)).toBe(1_000_000n - 4n * 1500n);
    } finally {
      await client.end();
      await outageProxy.close();
    }
  });

  it("is set from psql as PostgreSQL's booleans are, and refuses any other value, at connect time too", async () => {
    const agent = await fundedTestAgent(gateway, providerId, 1_000_000n);
    const lines = await psqlLines(slowClockProxy, agent, [
      "SET pgtoll.synchronous_charges = true",
      "SELECT id FROM items WHERE id <= 2",
      "SHOW pgtoll.synchronous_charges",
    ]);
    expect(lines).toEqual(["SET", "1", "2", "on"]);
    expect(await balanceOf(agent)).toBe(1_000_000n - 3000n);
    const client = await connectAgent(slowClockProxy, agent, providerId);
    try {
      await expect(client.query("SET pgtoll.synchronous_charges = maybe")).rejects.toMatchObject({
        code: "22023",
        message: 'invalid value for parameter "pgtoll.synchronous_charges": "maybe": on or off',
      });
      expect((await client.query("SHOW pgtoll.synchronous_charges")).rows[0]).toEqual({
        "pgtoll.synchronous_charges": "off",
      });
    } finally {
      await client.end();
    }
    await expect(
      connectAgent(slowClockProxy, agent, providerId, { options: "-c pgtoll.synchronous_charges=sometimes" }),
    ).rejects.toMatchObject({ code: "22023" });
  });
});
