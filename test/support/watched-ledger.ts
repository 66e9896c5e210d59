import type pg from "pg";
import type { Queryable } from "../../src/billing/ledger.js";

/**
 * `pool` as a ledger connection that tells `onStatement` the name of each statement before it runs (a ledger
 * statement's prepared name, such as `pgtoll_ledger_reserve`; the text of any other) and waits for what it
 * returns: a test counts the ledger's statements, holds one back or makes it fail.
 */
export function watchedLedger(
  pool: pg.Pool,
  onStatement: (name: string) => Promise<void> | undefined,
): Queryable {
  return {
    query: async (...args: Parameters<pg.Pool["query"]>) => {
      const [first] = args as unknown as [{ name?: string } | string];
      await onStatement(typeof first === "string" ? first : (first.name ?? ""));
      return pool.query(...args);
    },
  } as never;
}

/** A ledger over `pool` whose charge batches fail as an unreachable database makes them fail while `down`. */
export interface ChargeOutage {
  ledger: Queryable;
  down: boolean;
}

export function chargeOutage(pool: pg.Pool): ChargeOutage {
  const outage: ChargeOutage = {
    down: false,
    ledger: watchedLedger(pool, async (name) => {
      if (outage.down && name === "pgtoll_ledger_charge_batch")
        throw Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:5432"), { code: "ECONNREFUSED" });
    }),
  };
  return outage;
}
