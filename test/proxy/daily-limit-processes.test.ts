import pg from "pg";
import { generatePrivateKey, privateKeyToAddress } from "viem/accounts";
import { describe, expect, it } from "vitest";
import { costOfRows, priceOf } from "../../src/billing/cost.js";
import { formatMicro, parseMicro } from "../../src/billing/money.js";
import { SqlState } from "../../src/db/sql-state.js";
import { createAgentToken } from "../../src/proxy/agent-token.js";
import { runSql } from "../support/database.js";
import {
  creditAgent,
  ledgerStateOf,
  type PgtollProcess,
  registerProviderOver,
  useProcessesOnOneLedger,
} from "../support/pgtoll-process.js";
import { waitFor } from "../support/real-clients.js";

/** 1 USDC per 1000 rows, rows only, no minimum: a statement of n rows costs n × 1000 micro-USDC. */
const PRICE = priceOf({ priceMicroPer1000Rows: 1_000_000n, markupPpm: 1_000_000n });
const ROW = costOfRows(1, PRICE);
const LIMIT = "3";
const LIMIT_MICRO = parseMicro(LIMIT)!;
/** Far above the limit: the balance is never what stops the agent. */
const FUNDED = 100n * LIMIT_MICRO;
/** Wire sessions and REST clients of the agent, each, on each process. */
const WORKERS = 3;
const MOST_ROWS = 40;
/** A run that does not reach the limit by then was stopped short of it. */
const RUN_MS = 90_000;

// Small first holds: sessions top up often, so the two processes' holds interleave near the limit.
const fleet = useProcessesOnOneLedger(2, {
  PGTOLL_PROXY_RESERVE_ROWS: "50",
  PGTOLL_REST_AGENT_AUTH: "signature",
});
const { processes } = fleet;

interface Agent {
  wallet: string;
  providerId: string;
  /** Its token for the provider: the wire password, and `Authorization: Bearer` on the API. */
  token: string;
}

/** How one surface of one process served the agent: statements answered, what they cost, refusals. */
interface Tally {
  statements: number;
  chargedMicro: bigint;
  /** `<code> <message>` of each refusal: SQLSTATE on the wire, `<status> <code>` on the API. */
  refusals: string[];
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function statementOfRandomRows(): string {
  return `SELECT id, name FROM items WHERE id <= ${1 + Math.floor(Math.random() * MOST_ROWS)}`;
}

function limitsUrl(process: PgtollProcess, agent: Agent): string {
  return `${process.httpUrl}/api/agents/${agent.wallet}/limits/${agent.providerId}`;
}

async function dailyLimitOf(process: PgtollProcess, agent: Agent) {
  const response = await fetch(limitsUrl(process, agent), {
    headers: { authorization: `Bearer ${agent.token}` },
  });
  expect(response.status).toBe(200);
  return (await response.json()) as { dailyLimit: string; spentToday: string; remainingToday: string };
}

/**
 * Whether the agent is done after a refusal: today's remainder (the limit less what is written) pays no row.
 * A refusal with more left came from what the agent's other sessions hold at that moment, which they spend or
 * give back: the worker goes on.
 */
async function limitReached(process: PgtollProcess, agent: Agent, deadline: number): Promise<boolean> {
  const remaining = parseMicro((await dailyLimitOf(process, agent)).remainingToday)!;
  if (remaining < ROW) return true;
  if (Date.now() > deadline)
    throw new Error(`the agent was still refused with ${formatMicro(remaining)} USDC of its limit left`);
  await sleep(20);
  return false;
}

/**
 * One wire session after another, each running statements until one is refused; the session then ends (its
 * hold goes back), and the worker stops once the limit is reached. A result cut off after N rows was charged them.
 */
async function wireWorker(process: PgtollProcess, agent: Agent, tally: Tally, deadline: number) {
  do {
    const client = new pg.Client({
      host: "127.0.0.1",
      port: process.proxyPort,
      user: agent.wallet,
      database: agent.providerId,
      password: agent.token,
    });
    await client.connect();
    try {
      for (;;) {
        try {
          const { rowCount } = await client.query(statementOfRandomRows());
          tally.statements++;
          tally.chargedMicro += costOfRows(rowCount ?? 0, PRICE);
        } catch (error) {
          const { code, message } = error as { code?: string; message: string };
          // Not a refusal of the statement (the connection failed): the test fails with it.
          if (code === undefined) throw error;
          tally.refusals.push(`${code} ${message}`);
          tally.chargedMicro += costOfRows(Number(/cut off after (\d+) rows/.exec(message)?.[1] ?? 0), PRICE);
          break;
        }
      }
    } finally {
      await client.end();
    }
  } while (!(await limitReached(process, agent, deadline)));
}

/** `POST /api/query` one request after another, until one is refused with the limit reached. */
async function restWorker(process: PgtollProcess, agent: Agent, tally: Tally, deadline: number) {
  for (;;) {
    const response = await fetch(`${process.httpUrl}/api/query`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${agent.token}` },
      body: JSON.stringify({
        sql: statementOfRandomRows(),
        agentWallet: agent.wallet,
        providerId: agent.providerId,
      }),
    });
    const body = (await response.json()) as { actualCost?: string; code?: string; error?: string };
    if (response.status === 200) {
      tally.statements++;
      tally.chargedMicro += parseMicro(body.actualCost!)!;
      continue;
    }
    tally.refusals.push(`${response.status} ${body.code} ${body.error}`);
    if (await limitReached(process, agent, deadline)) return;
  }
}

/** What the agent's query entries of today (UTC) add up to, read from the ledger. */
async function chargedToday(agent: Agent): Promise<bigint> {
  const [row] = await runSql<{ total: string }>(
    `SELECT coalesce(-sum(amount_micro), 0)::text AS total FROM ledger_entries
      WHERE agent_wallet = '${agent.wallet}' AND provider_id = '${agent.providerId}' AND type = 'query'
        AND created_at >= (now() AT TIME ZONE 'UTC')::date::timestamp AT TIME ZONE 'UTC'`,
    fleet.ledgerUrl,
  );
  return BigInt(row!.total);
}

const LIMIT_TEXT = formatMicro(LIMIT_MICRO).replace(".", "\\.");
const WIRE_REFUSAL = new RegExp(
  `^${SqlState.budgetExceeded} daily limit of ${LIMIT_TEXT} USDC with this provider`,
);
const REST_REFUSAL = new RegExp(
  `^422 budget_exceeded over budget: daily limit of ${LIMIT_TEXT} USDC with this provider`,
);

/** A wire and a REST tally per process. */
function talliesPerProcess() {
  const tally = (): Tally => ({ statements: 0, chargedMicro: 0n, refusals: [] });
  return processes.map(() => ({ wire: tally(), rest: tally() }));
}

describe("an agent's daily limit, on two pgtoll processes on one ledger", () => {
  it("is held exactly by wire sessions and REST queries of both processes at once", async () => {
    const providerId = await registerProviderOver(processes[0]!.httpUrl, fleet.providerUrl, {
      basePricePer1000Rows: 1,
      markupMultiplier: 1,
    });
    const key = generatePrivateKey();
    const agent: Agent = {
      wallet: privateKeyToAddress(key).toLowerCase(),
      providerId,
      token: await createAgentToken(key, providerId),
    };
    await creditAgent(fleet.ledgerUrl, agent.wallet, providerId, FUNDED);
    const set = await fetch(limitsUrl(processes[1]!, agent), {
      method: "PUT",
      headers: { "content-type": "application/json", authorization: `Bearer ${agent.token}` },
      body: JSON.stringify({ dailyLimit: LIMIT }),
    });
    expect(set.status, await set.clone().text()).toBe(200);

    const tallies = talliesPerProcess();
    const deadline = Date.now() + RUN_MS;
    await Promise.all(
      processes.flatMap((process, i) =>
        Array.from({ length: WORKERS }, () => [
          wireWorker(process, agent, tallies[i]!.wire, deadline),
          restWorker(process, agent, tallies[i]!.rest, deadline),
        ]).flat(),
      ),
    );

    // Every session has ended: every window is written and every hold given back (each process sees to it).
    await waitFor(
      async () => (await ledgerStateOf(fleet.ledgerUrl, agent.wallet, providerId)).reservations === 0,
      10_000,
      "the agent's holds to be given back",
    );
    const charged = await chargedToday(agent);
    const told = tallies.reduce((sum, t) => sum + t.wire.chargedMicro + t.rest.chargedMicro, 0n);
    console.log(
      `daily limit of ${LIMIT} USDC over two processes: ${formatMicro(charged)} charged; ` +
        tallies
          .map(
            (t, i) =>
              `process ${i + 1}: wire ${t.wire.statements} statements, ${t.wire.refusals.length} refused; ` +
              `REST ${t.rest.statements} queries, ${t.rest.refusals.length} refused`,
          )
          .join("; "),
    );
    // Both surfaces of both processes served the agent, and the limit stopped each of them.
    for (const { wire, rest } of tallies)
      for (const tally of [wire, rest]) {
        expect(tally.statements).toBeGreaterThan(0);
        expect(tally.refusals.length).toBeGreaterThan(0);
      }
    // Every refusal names the daily limit: PT422 or 422 budget_exceeded, never PT402 or 402 (paying would not help).
    const refusals = tallies.flatMap(({ wire, rest }) => [
      ...wire.refusals.filter((refusal) => !WIRE_REFUSAL.test(refusal)),
      ...rest.refusals.filter((refusal) => !REST_REFUSAL.test(refusal)),
    ]);
    expect(refusals).toEqual([]);

    // The ledger charged exactly what the clients were told: the rows each wire statement delivered (a cut-off
    // one's too) and each answered query's actualCost; a refusal charged nothing.
    expect(charged).toBe(told);
    // The bound. At most the limit: every hold, in either process, is bounded in SQL by today's remainder less
    // what is held. Within one row of it: a worker stops only when a refusal leaves less than a row's cost of the
    // limit unwritten (a refusal with more left was what other sessions held then, which they spend or give
    // back); the limit stopping the agent any earlier would keep the workers running until RUN_MS fails the test.
    expect(charged).toBeLessThanOrEqual(LIMIT_MICRO);
    expect(charged).toBeGreaterThan(LIMIT_MICRO - ROW);

    for (const process of processes)
      expect(await dailyLimitOf(process, agent)).toMatchObject({
        dailyLimit: formatMicro(LIMIT_MICRO),
        spentToday: formatMicro(charged),
        remainingToday: formatMicro(LIMIT_MICRO - charged),
      });
    const state = await ledgerStateOf(fleet.ledgerUrl, agent.wallet, providerId);
    expect(state).toMatchObject({ reservedMicro: 0n, chained: true, balanceMicro: FUNDED - charged });
    expect(state.entriesSumMicro).toBe(state.balanceMicro);

    // Reached, it stops every surface of every process before anything runs, and nothing more is charged.
    const after = talliesPerProcess();
    await Promise.all(
      processes.flatMap((process, i) => [
        wireWorker(process, agent, after[i]!.wire, Date.now()),
        restWorker(process, agent, after[i]!.rest, Date.now()),
      ]),
    );
    for (const { wire, rest } of after) {
      expect(wire).toMatchObject({ statements: 0, chargedMicro: 0n });
      expect(wire.refusals).toEqual([expect.stringMatching(WIRE_REFUSAL)]);
      expect(wire.refusals[0]).toMatch(/the statement was not run/);
      expect(rest).toMatchObject({ statements: 0, chargedMicro: 0n });
      expect(rest.refusals).toEqual([expect.stringMatching(REST_REFUSAL)]);
    }
    expect(await chargedToday(agent)).toBe(charged);
  }, 180_000);

  it("binds a wire session open on one process when it is set on the other", async () => {
    const providerId = await registerProviderOver(processes[0]!.httpUrl, fleet.providerUrl, {
      basePricePer1000Rows: 1,
      markupMultiplier: 1,
    });
    const key = generatePrivateKey();
    const agent: Agent = {
      wallet: privateKeyToAddress(key).toLowerCase(),
      providerId,
      token: await createAgentToken(key, providerId),
    };
    await creditAgent(fleet.ledgerUrl, agent.wallet, providerId, FUNDED);
    const client = new pg.Client({
      host: "127.0.0.1",
      port: processes[0]!.proxyPort,
      user: agent.wallet,
      database: providerId,
      password: agent.token,
    });
    await client.connect();
    try {
      // The session's hold is 50 rows' worth or more: 45 rows or more are left in it after this.
      expect((await client.query("SELECT id FROM items ORDER BY id LIMIT 5")).rowCount).toBe(5);
      const set = await fetch(limitsUrl(processes[1]!, agent), {
        method: "PUT",
        headers: { "content-type": "application/json", authorization: `Bearer ${agent.token}` },
        body: JSON.stringify({ dailyLimit: "0.01" }),
      });
      expect(set.status, await set.clone().text()).toBe(200);
      // The other process hears of it through the ledger's notification, in milliseconds.
      await sleep(500);
      const failure = await client.query("SELECT id FROM items ORDER BY id").then(
        (result) => new Error(`all ${result.rowCount} rows were delivered past the limit`),
        (error: pg.DatabaseError) => error,
      );
      expect((failure as pg.DatabaseError).code, failure.message).toBe(SqlState.budgetExceeded);
      const delivered = Number(/cut off after (\d+) rows/.exec(failure.message)?.[1] ?? 0);
      expect(delivered).toBeLessThanOrEqual(5);
    } finally {
      await client.end();
    }
    await waitFor(
      async () => (await ledgerStateOf(fleet.ledgerUrl, agent.wallet, providerId)).reservations === 0,
      10_000,
      "the agent's holds to be given back",
    );
    expect(await chargedToday(agent)).toBeLessThanOrEqual(10_000n);
    const state = await ledgerStateOf(fleet.ledgerUrl, agent.wallet, providerId);
    expect(state).toMatchObject({ reservedMicro: 0n, chained: true });
    expect(state.balanceMicro).toBe(FUNDED - (await chargedToday(agent)));
  }, 60_000);
});
