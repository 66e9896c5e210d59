import { randomUUID } from "node:crypto";
import { ChargeWriter } from "../../src/billing/charge-writer.js";
import { type Price, priceOf } from "../../src/billing/cost.js";
import { WindowClock } from "../../src/billing/window-clock.js";
import { StatementShapes } from "../../src/guard/statement-shape.js";
import { SessionMeter } from "../../src/proxy/session-meter.js";
import type { LedgerDatabase } from "./fixtures.js";

/** 1 micro-USDC a row: costs in tests are row counts. */
export const ONE_MICRO_A_ROW: Price = priceOf({ priceMicroPer1000Rows: 1000n, markupPpm: 1_000_000n });

/** A session's meter over the test ledger, as the proxy makes one, holding `reserveRows` rows at a time. */
export function meterOver(
  ledger: LedgerDatabase,
  agentWallet: string,
  reserveRows: number,
  price: Price = ONE_MICRO_A_ROW,
): SessionMeter {
  const writer = new ChargeWriter(ledger.pool, { ttlSeconds: 60 });
  return new SessionMeter(ledger.pool, writer, agentWallet, ledger.providerId, price, {
    reserveRows,
    maxReserveRows: reserveRows,
    reservationTtlSeconds: 60,
    clock: new WindowClock(10_000, writer),
    windowMaxCostMicro: 1_000_000n,
    sessionId: randomUUID(),
    shapes: new StatementShapes(),
  });
}
