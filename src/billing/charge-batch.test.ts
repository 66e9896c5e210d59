import { describe, expect, it } from "vitest";
import { depositFor, useLedgerDatabase } from "../../test/support/fixtures.js";
import { createMetadataPool } from "../db/pool.js";
import {
  CHARGE_BATCH,
  chargeReservations,
  extendReservation,
  getBalance,
  type Reservation,
  reserveFunds,
  voidReservation,
} from "./ledger.js";

const meta = useLedgerDatabase();

async function heldReservation(): Promise<Reservation> {
  const agentWallet = await depositFor(meta.pool, meta.providerId, 1000n);
  const r = await reserveFunds(meta.pool, {
    agentWallet,
    providerId: meta.providerId,
    minMicro: 100n,
    maxMicro: 100n,
    ttlSeconds: 600,
  });
  if (!r) throw new Error("no reservation");
  return r;
}

const secondsLeft = async (r: Reservation) =>
  Number(
    (
      await meta.pool.query<{ left: number }>(
        "SELECT extract(epoch FROM expires_at - now())::float8 AS left FROM reservations WHERE id = $1",
        [r.id],
      )
    ).rows[0]!.left,
  );

const chargeOf = (r: Reservation) => ({
  reservationId: r.id,
  agentWallet: r.agentWallet,
  providerId: meta.providerId,
  costMicro: 1n,
  metadata: { sql: "SELECT 1", rowCount: 1 },
});

describe("chargeReservations", () => {
  it("pushes a reservation's expiry out only once half of its TTL has gone by", async () => {
    const fresh = await heldReservation();
    const old = await heldReservation();
    await meta.pool.query(
      "UPDATE reservations SET expires_at = now() + interval '100 seconds' WHERE id = $1",
      [old.id],
    );
    await chargeReservations(meta.pool, [chargeOf(fresh), chargeOf(old)], 600);
    // 600 s at reservation, untouched (it has more than 300 s left); the other one pushed out to 600 s.
    expect(await secondsLeft(fresh)).toBeGreaterThan(590);
    expect(await secondsLeft(fresh)).toBeLessThanOrEqual(600);
    expect(await secondsLeft(old)).toBeGreaterThan(590);
    await meta.pool.query(
      "UPDATE reservations SET expires_at = now() + interval '400 seconds' WHERE id = $1",
      [old.id],
    );
    await chargeReservations(meta.pool, [chargeOf(old)], 600);
    expect(await secondsLeft(old)).toBeLessThanOrEqual(400);
  });

  it("takes a reservation's lock before its balance's, as growing the reservation does (no deadlock)", async () => {
    const r = await heldReservation();
    const holder = createMetadataPool(meta.db.url, 2);
    const lockHolder = await holder.connect();
    try {
      // A charge batch holding the reservation, about to update the balance.
      await lockHolder.query("BEGIN");
      await lockHolder.query("SELECT 1 FROM reservations WHERE id = $1 FOR UPDATE", [r.id]);
      const growing = extendReservation(meta.pool, r, 1n, 10n);
      for (;;) {
        const { rows } = await meta.pool.query<{ waiting: number }>(
          `SELECT count(*)::int AS waiting FROM pg_stat_activity
            WHERE datname = current_database() AND wait_event_type = 'Lock'`,
        );
        if (rows[0]!.waiting > 0) break;
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
      // The waiting extension holds no lock on the balance row: the batch goes on at once and commits.
      await lockHolder.query("SET LOCAL lock_timeout = '300ms'");
      await lockHolder.query(
        "UPDATE balances SET updated_at = now() WHERE agent_wallet = $1 AND provider_id = $2",
        [r.agentWallet, meta.providerId],
      );
      await lockHolder.query("COMMIT");
      expect(await growing).toBe(10n);
    } finally {
      lockHolder.release();
      await holder.end();
    }
    expect(await getBalance(meta.pool, r.agentWallet, meta.providerId)).toMatchObject({
      reservedMicro: 110n,
    });
    await voidReservation(meta.pool, r);
  });
});

describe("the charge batch's plan", () => {
  it("probes the charge-key index per charge, never scanning the ledger, even as a generic plan", async () => {
    const client = await meta.pool.connect();
    try {
      await client.query("BEGIN");
      // The plan the writer's prepared statement settles on after five executions.
      await client.query("SET LOCAL plan_cache_mode = force_generic_plan");
      await client.query(
        `PREPARE batch_plan(uuid[], bigint[], jsonb, float8, uuid[]) AS ${CHARGE_BATCH.text}`,
      );
      const { rows } = await client.query<{ "QUERY PLAN": string }>(
        "EXPLAIN EXECUTE batch_plan('{}', '{}', '[]', 300, '{}')",
      );
      const plan = rows.map((row) => row["QUERY PLAN"]).join("\n");
      expect(plan).toContain("ledger_entries_charge_key");
      expect(plan).not.toMatch(/Seq Scan on ledger_entries/);
    } finally {
      await client.query("ROLLBACK");
      client.release();
    }
  });
});
