import pino from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { depositFor, randomWallet, useLedgerDatabase } from "../../test/support/fixtures.js";
import { meterOver, ONE_MICRO_A_ROW } from "../../test/support/session-meter.js";
import { type Price, priceOf } from "../billing/cost.js";
import { getBalance } from "../billing/ledger.js";
import { SqlState } from "../db/sql-state.js";
import { decodeNoticeFields, type NoticeFields } from "./backend-messages.js";
import { FRAME_HEADER_LENGTH } from "./frame-reader.js";
import { encodeCommandComplete, encodeErrorResponse, encodeNoticeResponse } from "./serializer.js";
import type { SessionMeter } from "./session-meter.js";
import { type StatementMetering, statementMetering } from "./statement-metering.js";

const ledger = useLedgerDatabase();

/** The fields of an ErrorResponse or NoticeResponse frame. */
function fieldsOf(frame: Buffer | undefined): NoticeFields {
  if (!frame) throw new Error("no frame");
  return decodeNoticeFields(frame.subarray(FRAME_HEADER_LENGTH));
}

const meters: SessionMeter[] = [];
afterEach(async () => {
  await Promise.all(meters.splice(0).map((meter) => meter.release()));
});

/** Statement metering of an agent with `depositMicro` (1 micro-USDC a row), and the refusals it counted. */
async function meteringFor(
  depositMicro: bigint,
  reserveRows = 10,
  maxRowsWritten = 1000,
  price: Price = ONE_MICRO_A_ROW,
) {
  const agent =
    depositMicro > 0n ? await depositFor(ledger.pool, ledger.providerId, depositMicro) : randomWallet();
  const meter = meterOver(ledger, agent, reserveRows, price);
  meters.push(meter);
  const refusals: string[] = [];
  const metering: StatementMetering = statementMetering({
    meter,
    maxRowsWritten,
    logger: pino({ level: "silent" }),
    countRefusal: (kind, rule) => refusals.push(`${kind}/${rule}`),
  });
  return { agent, meter, metering, refusals };
}

const DATABASE_ERROR = encodeErrorResponse({
  severity: "ERROR",
  code: "22P02",
  message: 'invalid input syntax for type integer: "secret value"',
});

describe("statement metering", () => {
  it("lets a statement start once the hold pays for a row, and refuses one nothing funds, counted", async () => {
    const funded = await meteringFor(100n);
    // Nothing is held before the first statement: it waits for the hold.
    await expect(funded.metering.startStatement()).resolves.toBeUndefined();
    expect(funded.metering.startStatement()).toBeUndefined();

    const broke = await meteringFor(0n);
    const refusal = fieldsOf(await broke.metering.startStatement());
    expect(refusal).toMatchObject({ code: SqlState.insufficientFunds });
    expect(refusal.message).toContain("deposit funds with this provider");
    expect(broke.refusals).toEqual(["funds/insufficient-balance"]);
  });

  it("allows rows as far as the hold pays, then cuts the result off, charging exactly the rows delivered", async () => {
    const { agent, meter, metering, refusals } = await meteringFor(5n);
    await metering.startStatement();
    expect(metering.allowRows(8, 8 * 20)).toBe(5);
    await expect(metering.fundRow(20)).resolves.toBe("unfunded");
    const error = fieldsOf(await metering.cutOff("SELECT * FROM items", "unfunded"));
    expect(error.code).toBe(SqlState.insufficientFunds);
    expect(error.message).toContain("the result was cut off after 5 rows, which were charged");
    expect(refusals).toEqual(["funds/balance-cut-off"]);
    await meter.release();
    expect(await getBalance(ledger.pool, agent, ledger.providerId)).toMatchObject({
      balanceMicro: 0n,
      reservedMicro: 0n,
    });
  });

  it("charges a MOVE as one row, and cuts it off when that row is not paid for", async () => {
    const { metering, meter } = await meteringFor(1n, 1);
    await metering.startStatement();
    const move = encodeCommandComplete("MOVE 40");
    expect(metering.endStatement("MOVE 40 IN c", move, 0, 0)).toBeUndefined();
    expect(meter.sessionCostMicro).toBe(1n);
    expect(metering.endStatement("MOVE 40 IN c", move, 0, 0)).toBe("unfunded");
    // A statement with rows is charged by its rows, whatever its tag.
    expect(metering.endStatement("SELECT 1", encodeCommandComplete("SELECT 0"), 0, 0)).toBeUndefined();
    expect(meter.sessionCostMicro).toBe(1n);
  });

  it("pays for a write the balance covers, and answers the error that rolls back one it does not or that wrote too much", async () => {
    const { metering, meter } = await meteringFor(10n, 5, 20);
    await metering.startStatement();
    expect(metering.endWrite(3, "UPDATE items SET n = 1", 0)).toBe(true);
    expect(meter.sessionCostMicro).toBe(3n);
    const tooMany = metering.endWrite(21, "UPDATE items SET n = 2", 0);
    expect(fieldsOf(tooMany as Buffer)).toMatchObject({ code: SqlState.programLimitExceeded });
    // 15 rows: more than the 7 micro-USDC left.
    const unpaid = await metering.endWrite(15, "UPDATE items SET n = 3", 0);
    expect(fieldsOf(unpaid as Buffer)).toMatchObject({ code: SqlState.insufficientFunds });
    expect(meter.sessionCostMicro).toBe(3n);
  });

  it("charges a database error as a row, and withholds its text when that row is not paid for", async () => {
    const { metering, meter } = await meteringFor(1n, 1);
    await metering.startStatement();
    const paid = fieldsOf(await metering.errorOf(DATABASE_ERROR, 0, DATABASE_ERROR.length));
    expect(paid).toMatchObject({
      code: "22P02",
      message: 'invalid input syntax for type integer: "secret value"',
    });
    metering.failStatement("SELECT 'secret value'::int");
    expect(meter.sessionCostMicro).toBe(1n);
    const withheld = fieldsOf(await metering.errorOf(DATABASE_ERROR, 0, DATABASE_ERROR.length));
    expect(withheld.code).toBe("22P02");
    expect(withheld.message).not.toContain("secret");
  });

  it("drops a notice within a statement the hold does not pay for, and relays one between statements free", async () => {
    const { metering } = await meteringFor(0n);
    const notice = encodeNoticeResponse({ severity: "NOTICE", code: "00000", message: "hello" });
    expect(metering.noticeOf(notice, 0, notice.length, true)).toBeUndefined();
    expect(fieldsOf(metering.noticeOf(notice, 0, notice.length, false)).message).toBe("hello");
  });

  it("withholds the text of errors, COMMIT errors and notices of statements that read a priced table", async () => {
    const price = priceOf({
      priceMicroPer1000Rows: 1000n,
      markupPpm: 1_000_000n,
      tablePricesMicroPer1000Rows: new Map([["secret_prices", 1000n]]),
    });
    const { metering } = await meteringFor(100n, 10, 1000, price);
    await metering.startStatement();
    const priced = { sql: "SELECT secret::int FROM secret_prices", readsPricedTable: true } as const;
    const unpriced = { sql: "SELECT name::int FROM items" };
    const statement = (s: { sql: string; readsPricedTable?: true }) => ({
      ...s,
      command: "SELECT",
      explainable: true,
      returnsRows: true,
      transactionControl: false,
      writes: false,
    });
    const notice = encodeNoticeResponse({ severity: "NOTICE", code: "01000", message: "secret value" });
    for (const [shown, withheld] of [
      [
        await metering.errorOf(DATABASE_ERROR, 0, DATABASE_ERROR.length, statement(unpriced)),
        await metering.errorOf(DATABASE_ERROR, 0, DATABASE_ERROR.length, statement(priced)),
      ],
      [
        metering.commitErrorOf(DATABASE_ERROR, 0, DATABASE_ERROR.length, [statement(unpriced)]),
        metering.commitErrorOf(DATABASE_ERROR, 0, DATABASE_ERROR.length, [
          statement(unpriced),
          statement(priced),
        ]),
      ],
      [
        metering.noticeOf(notice, 0, notice.length, true, statement(unpriced)),
        metering.noticeOf(notice, 0, notice.length, true, statement(priced)),
      ],
    ]) {
      expect(fieldsOf(shown).message).toContain("secret value");
      expect(fieldsOf(withheld).message).toMatch(/withheld because the statement reads a priced table/);
      expect(fieldsOf(withheld).message).not.toContain("secret");
    }
    // What the relay cannot tie to a statement counts as reading a priced table.
    const unknown = await metering.errorOf(DATABASE_ERROR, 0, DATABASE_ERROR.length, undefined);
    expect(fieldsOf(unknown)).toMatchObject({ code: "22P02" });
    expect(fieldsOf(unknown).message).not.toContain("secret");
  });
});
