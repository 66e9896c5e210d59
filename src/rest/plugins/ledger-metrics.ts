import { Gauge, Histogram, type Registry } from "prom-client";
import type { ChargeWriter } from "../../billing/charge-writer.js";
import type { Queryable } from "../../billing/ledger.js";

const WRITE_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5];

/**
 * The ledger seen from this process, for /metrics: how long each batch of charges takes to write and how many
 * wait in each charge writer's queue (`watchWriter`), and the holds outstanding in the ledger (`watchHolds`: one
 * small query on `reservations` per scrape).
 */
export function ledgerMetrics(registry: Registry) {
  const registers = [registry];
  const writers = new Map<string, Pick<ChargeWriter, "pending">>();
  let holdsDb: Queryable | undefined;
  const writeSeconds = new Histogram({
    name: "pgtoll_ledger_write_duration_seconds",
    help: "Time to write one batch of charges to the ledger, by writer (proxy, rest)",
    labelNames: ["writer"] as const,
    buckets: WRITE_BUCKETS,
    registers,
  });
  new Gauge({
    name: "pgtoll_ledger_queued_charges",
    help: "Charges waiting in a writer's queue for the ledger, by writer (proxy, rest)",
    labelNames: ["writer"] as const,
    registers,
    collect() {
      for (const [name, writer] of writers) this.set({ writer: name }, writer.pending);
    },
  });
  new Gauge({
    name: "pgtoll_holds_outstanding",
    help: "Reservations not yet settled, voided or expired, all processes",
    registers,
    async collect() {
      if (!holdsDb) return;
      const { rows } = await holdsDb.query<{ holds: string; micro: string }>(
        "SELECT count(*)::text AS holds, COALESCE(sum(amount_micro), 0)::text AS micro FROM reservations",
      );
      this.set(Number(rows[0]?.holds ?? 0));
      holdsMicro.set(Number(rows[0]?.micro ?? 0));
    },
  });
  // Registered after the count, whose collect sets it: one query per scrape for both.
  const holdsMicro = new Gauge({
    name: "pgtoll_holds_outstanding_micro_usdc",
    help: "Micro-USDC held by reservations not yet settled, voided or expired, all processes",
    registers,
  });
  return {
    /** Observes one batch written by `writer`, in seconds (ChargeWriter's `onBatchWritten`). */
    observeBatch: (writer: string, seconds: number) => writeSeconds.observe({ writer }, seconds),
    watchWriter: (name: string, writer: Pick<ChargeWriter, "pending">) => void writers.set(name, writer),
    watchHolds: (db: Queryable) => {
      holdsDb = db;
    },
  };
}
