import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { getBalance } from "../../src/billing/ledger.js";
import { SqlState } from "../../src/db/sql-state.js";
import {
  connectAgent,
  fundedTestAgent,
  type ProxiedProvider,
  startProxiedProvider,
} from "../support/proxy.js";

let provider: ProxiedProvider;

beforeAll(async () => {
  provider = await startProxiedProvider();
});
afterAll(() => provider?.close());

/** A node-postgres session of a new agent holding 10 USDC (1 USDC per 1000 rows here). */
async function agentSession() {
  const agent = await fundedTestAgent(provider.gateway, provider.providerId, 10_000_000n);
  const client = await connectAgent(provider.proxy, agent, provider.providerId);
  const spent = async () =>
    10_000_000n - (await getBalance(provider.gateway.ctx.db, agent.wallet, provider.providerId)).balanceMicro;
  return { client, spent };
}

describe("an agent's caps on one query's answer (pgtoll.max_result_rows, pgtoll.max_result_bytes)", () => {
  it("cuts a result off before the row past the cap, charging only the rows relayed", async () => {
    const { client, spent } = await agentSession();
    try {
      await client.query("SET pgtoll.max_result_rows = 25");
      expect((await client.query("SHOW pgtoll.max_result_rows")).rows).toEqual([
        { "pgtoll.max_result_rows": "25" },
      ]);
      const error = await client
        .query("SELECT g FROM generate_series(1, 5000000) g")
        .catch((failure: unknown) => failure);
      expect(error).toMatchObject({
        code: SqlState.programLimitExceeded,
        message: expect.stringMatching(
          /^result too large: more than 25 rows \(pgtoll.max_result_rows\): the result was cut off after 25 rows, which were charged$/,
        ),
      });
      // The cap counts a query's statements together, and starts again with the next query.
      expect((await client.query("SELECT g FROM generate_series(1, 20) g")).rowCount).toBe(20);
      await client.query("SHOW pgtoll.balance");
      // 25 rows cut off, then 20: 45 rows at 1 USDC per 1000.
      expect(await spent()).toBe(45_000n);
    } finally {
      await client.end();
    }
  });

  it("cuts a result off at its bytes, and a RESET lifts the cap", async () => {
    const { client, spent } = await agentSession();
    try {
      await client.query("SET pgtoll.max_result_bytes = 10000");
      const error = await client
        .query("SELECT repeat('x', 1000) AS v FROM generate_series(1, 1000000)")
        .catch((failure: unknown) => failure);
      expect(error).toMatchObject({
        code: SqlState.programLimitExceeded,
        // A row's DataRow payload is its value's 1000 bytes, its length word and the column count: 1006.
        message: expect.stringMatching(/more than 10000 bytes of rows .* cut off after 9 rows/),
      });
      await client.query("RESET pgtoll.max_result_bytes");
      expect((await client.query("SELECT repeat('x', 1000) FROM generate_series(1, 30)")).rowCount).toBe(30);
      await client.query("SHOW pgtoll.balance");
      expect(await spent()).toBe(39_000n);
    } finally {
      await client.end();
    }
  });

  it("refuses a value that is not a whole number of rows or bytes", async () => {
    const { client } = await agentSession();
    try {
      for (const value of ["0", "-1", "1.5", "'many'"])
        await expect(client.query(`SET pgtoll.max_result_rows = ${value}`)).rejects.toMatchObject({
          code: SqlState.invalidParameterValue,
        });
      expect((await client.query("SHOW pgtoll.max_result_rows")).rows[0]["pgtoll.max_result_rows"]).toBe(
        "none",
      );
    } finally {
      await client.end();
    }
  });
});
