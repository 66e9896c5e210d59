import { describe, expect, it } from "vitest";
import { costOfRows, priceOf } from "../billing/cost.js";
import { SqlState } from "../db/sql-state.js";
import { fundsRefusal, readFundsRefusal } from "./funds-refusal.js";

const WALLET = "0x70997970c51812dc3a010c7d01b50e0d17dc79c8";

describe("the refusal of a session for want of funds", () => {
  it("says what is available, what is needed and where to deposit, and reads back as such", () => {
    const price = priceOf({ priceMicroPer1000Rows: 1_000_000n, markupPpm: 1_500_000n });
    const refusal = fundsRefusal(
      "p1",
      { tier: "unfunded", availableMicro: 700n, heldMicro: 0n, neededMicro: costOfRows(1, price) },
      price,
      WALLET,
    );
    expect(refusal).toMatchObject({ sqlState: SqlState.insufficientFunds, reason: "insufficient_funds" });
    expect(refusal.message).toBe(
      "insufficient funds: 0.000700 USDC available with provider p1; a session needs at least 0.001500 USDC (one row at 1.500000 USDC per 1000 rows)",
    );
    expect(refusal.hint).toContain(`the provider's wallet is ${WALLET}. POST /api/topup`);
    const read = readFundsRefusal({ code: refusal.sqlState, message: refusal.message, hint: refusal.hint });
    expect(read).toEqual({
      availableMicro: 700n,
      price,
      depositAddress: WALLET,
    });
    // The price read back costs a row as the provider's own does.
    expect(costOfRows(7, read!.price)).toBe(costOfRows(7, price));
  });

  it("reads nothing from another error", () => {
    expect(
      readFundsRefusal({ code: "PT402", message: "insufficient balance: the result was cut off" }),
    ).toBeNull();
    expect(readFundsRefusal({ code: "53300", message: "too many", hint: "x" })).toBeNull();
    expect(readFundsRefusal(undefined)).toBeNull();
  });
});
