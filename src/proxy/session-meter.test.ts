import { describe, expect, it } from "vitest";
import { depositFor, randomWallet, useLedgerDatabase } from "../../test/support/fixtures.js";
import { ChargeWriter } from "../billing/charge-writer.js";
import { getBalance, listLedgerEntries } from "../billing/ledger.js";
import { SessionMeter } from "./session-meter.js";

const meta = useLedgerDatabase();

/** 1 micro-USDC a row: costs in tests are row counts. */
const ONE_MICRO_A_ROW = { priceMicroPer1000Rows: 1000n, markupPpm: 1_000_000n };

/** A meter whose blocking top-ups (the session stops for the ledger) are counted. */
function countedMeter(agentWallet: string, reserveRows: number, price = ONE_MICRO_A_ROW) {
  const writer = new ChargeWriter(meta.pool, { ttlSeconds: 60 });
  const meter = new SessionMeter(meta.pool, writer, agentWallet, meta.providerId, price, {
    reserveRows,
    reservationTtlSeconds: 60,
  });
  const counted = { meter, waits: 0 };
  const topUp = meter.topUp.bind(meter);
  meter.topUp = (minRows?: number) => {
    counted.waits++;
    return topUp(minRows);
  };
  return counted;
}

/** What the relay does for one statement of `rows` rows; false when the agent cannot pay for it. */
async function runStatement(meter: SessionMeter, rows: number): Promise<boolean> {
  if (!meter.canStart && !(await meter.topUp(1))) return false;
  for (let i = 0; i < rows; i++) {
    // As the relay: a row the reservation does not pay for waits for one top-up, or the result is cut off.
    if (!meter.allowRow() && (!(await meter.topUp(1)) || !meter.allowRow())) return false;
  }
  await meter.endStatement(rows, { sql: "SELECT 1", rowCount: rows });
  return true;
}

/** The client's think time between statements, during which a top-up ahead can land. */
const pause = () => new Promise((resolve) => setTimeout(resolve, 2));

describe("SessionMeter", () => {
  it("reserves the next chunk ahead, so a busy session does not stop for the ledger every chunk", async () => {
    const agent = await depositFor(meta.pool, meta.providerId, 1000n);
    const counted = countedMeter(agent, 20);
    const meter = counted.meter;
    for (let i = 0; i < 200; i++) {
      expect(await runStatement(meter, 1)).toBe(true);
      await pause();
    }
    await meter.release();
    // Without top-ups ahead: one wait per chunk of 20 statements, 10 in all.
    expect(counted.waits).toBeLessThanOrEqual(3);
    expect(await getBalance(meta.pool, agent, meta.providerId)).toMatchObject({
      balanceMicro: 800n,
      reservedMicro: 0n,
    });
    const entries = await listLedgerEntries(meta.pool, agent, { providerId: meta.providerId, limit: 1000 });
    expect(entries.filter((entry) => entry.type === "query")).toHaveLength(200);
  });

  it("spends a balance smaller than a chunk to the last micro-USDC, then refuses", async () => {
    const agent = await depositFor(meta.pool, meta.providerId, 25n);
    const { meter } = countedMeter(agent, 20);
    let ran = 0;
    while (await runStatement(meter, 1)) {
      ran++;
      await pause();
    }
    await meter.release();
    expect(ran).toBe(25);
    expect(await getBalance(meta.pool, agent, meta.providerId)).toMatchObject({
      balanceMicro: 0n,
      reservedMicro: 0n,
    });
  });

  it("gives back a chunk reserved ahead when the session ends while it is being reserved", async () => {
    const agent = await depositFor(meta.pool, meta.providerId, 1000n);
    const { meter } = countedMeter(agent, 20);
    // 11 one-row statements leave 9 of the first chunk: the 11th starts a top-up ahead, and the session ends.
    for (let i = 0; i < 11; i++) expect(await runStatement(meter, 1)).toBe(true);
    await meter.release();
    expect(await getBalance(meta.pool, agent, meta.providerId)).toMatchObject({
      balanceMicro: 989n,
      reservedMicro: 0n,
    });
  });

  it("lets every row of a provider that charges nothing through, from the first statement, without the ledger", async () => {
    const agent = randomWallet(); // no balance at all
    const counted = countedMeter(agent, 20, { priceMicroPer1000Rows: 0n, markupPpm: 1_000_000n });
    for (const rows of [3, 0, 500]) expect(await runStatement(counted.meter, rows)).toBe(true);
    await counted.meter.release();
    expect(counted.waits).toBe(0);
    expect(await listLedgerEntries(meta.pool, agent, { providerId: meta.providerId, limit: 10 })).toEqual([]);
  });
});
