import { randomUUID } from "node:crypto";
import { performance } from "node:perf_hooks";
import type pg from "pg";
import { ChargeWriter } from "../src/billing/charge-writer.js";
import { priceOf } from "../src/billing/cost.js";
import { releaseWithCharge, reserveFunds } from "../src/billing/ledger.js";
import { WindowClock } from "../src/billing/window-clock.js";
import { loadConfig } from "../src/config.js";
import { createMetadataPool } from "../src/db/pool.js";
import { loadGuard } from "../src/guard/index.js";
import { StatementShapes } from "../src/guard/statement-shape.js";
import { SessionMeter } from "../src/proxy/session-meter.js";
import { type CpuSnapshot, cpuSpent } from "./cpu-usage.js";
import { fundedAgent } from "./metered-agent.js";
import { type Spread, spread } from "./stats.js";

export type LedgerMode = "reserve-release" | "charge-writer" | "charge-stream" | "charge-windows";

export interface LedgerCell {
  mode: LedgerMode;
  sessions: number;
  /**
   * Written charges (ledger entries written and committed) per second; for charge-windows, metered
   * statements per second (their charges written in windows).
   */
  chargesPerSecond: Spread;
  /** CPU microseconds per charge (charge-windows: per metered statement) of PostgreSQL and of this process. */
  cpuUsPerCharge: { postgres: number; client: number };
  /** After the runs: balance = sum of the agent's entries and no reservation left behind. */
  consistent: boolean;
}

/** What one statement of one row costs at the benchmark's price (120 micro-USDC); its exact value is irrelevant. */
const COST_MICRO = 120n;
/** The benchmark's price (0.1 USDC per 1000 rows, markup 1.2): a row costs COST_MICRO. */
const STREAM_PRICE = priceOf({ priceMicroPer1000Rows: 100_000n, markupPpm: 1_200_000n });

/**
 * Charges per second that the charge-stream mode offers, about what the proxy meters on two cores with pgbench
 * and PostgreSQL beside it: the stream shows what the ledger costs PostgreSQL per metered statement there.
 */
const STREAM_RATE = 5000;

/** What the proxy records for a pgbench select: its text (a new literal each time) and its row count. */
function chargeMetadata(n: number): Record<string, unknown> {
  return { sql: `SELECT abalance FROM pgbench_accounts WHERE aid = ${(n * 7919) % 1_000_000};`, rowCount: 1 };
}

/**
 * The wire proxy's pattern: `sessions` sessions share a stream of STREAM_RATE charges/s, queued without
 * waiting for them to be written (a client gets its result before its charge is durable). Returns once every
 * charge is written; the rate falls below STREAM_RATE only when the ledger cannot keep up.
 */
async function stream(
  db: pg.Pool,
  sessions: number,
  target: { agentWallet: string; providerId: string },
  durationS: number,
) {
  const writer = new ChargeWriter(db, { ttlSeconds: 300 });
  const reservations = await Promise.all(
    Array.from({ length: sessions }, () =>
      reserveFunds(db, { ...target, minMicro: 1_000_000_000n, maxMicro: 1_000_000_000n, ttlSeconds: 300 }),
    ),
  );
  const started = performance.now();
  const written: Promise<void>[] = [];
  while (performance.now() - started < durationS * 1000) {
    const due = Math.floor(((performance.now() - started) / 1000) * STREAM_RATE);
    while (written.length < due) {
      const reservation = reservations[written.length % sessions];
      if (!reservation) throw new Error("the ledger benchmark's agent ran out of funds");
      written.push(
        writer.enqueue({
          reservationId: reservation.id,
          ...target,
          costMicro: COST_MICRO,
          metadata: chargeMetadata(written.length),
        }),
      );
    }
    await new Promise((resolve) => setTimeout(resolve, 1));
  }
  await Promise.all(written);
  const rate = written.length / ((performance.now() - started) / 1000);
  await Promise.all(reservations.map((r) => r && releaseWithCharge(db, r, 0n, {})));
  return { rate, charges: written.length };
}

/**
 * The wire proxy's metering as it is: `sessions` real {@link SessionMeter}s with pgtoll's default settings share a
 * stream of STREAM_RATE one-row statements/s (a new literal in each text), each charged by the cost rule in the
 * session's window and written to the ledger one entry per window; then each session ends (its last window and
 * its hold are written). Returns the statements metered.
 */
async function meteredStream(
  db: pg.Pool,
  sessions: number,
  target: { agentWallet: string; providerId: string },
  durationS: number,
) {
  const config = loadConfig({ PGTOLL_WINDOW_INTERVAL_MS: process.env.PGTOLL_WINDOW_INTERVAL_MS });
  const writer = new ChargeWriter(db, { ttlSeconds: config.reservationTtlSeconds });
  const shapes = new StatementShapes();
  const clock = new WindowClock(config.windowIntervalMs, writer);
  const meters = Array.from(
    { length: sessions },
    () =>
      new SessionMeter(db, writer, target.agentWallet, target.providerId, STREAM_PRICE, {
        reserveRows: config.proxyReserveRows,
        maxReserveRows: config.proxyReserveMaxRows,
        reservationTtlSeconds: config.reservationTtlSeconds,
        clock,
        windowMaxCostMicro: config.windowMaxCostMicro,
        sessionId: randomUUID(),
        shapes,
      }),
  );
  const started = performance.now();
  let statements = 0;
  while (performance.now() - started < durationS * 1000) {
    const due = Math.floor(((performance.now() - started) / 1000) * STREAM_RATE);
    while (statements < due) {
      const meter = meters[statements % sessions]!;
      // As the relay: a statement starts once the hold pays for a row, its row is counted, then it ends.
      if (
        (meter.canStart || (await meter.topUp(1))) &&
        (meter.allowRow() || ((await meter.topUp(1)) && meter.allowRow()))
      )
        await meter.endStatement(1, chargeMetadata(statements).sql as string);
      else throw new Error("the ledger benchmark's agent ran out of funds");
      statements++;
    }
    await new Promise((resolve) => setTimeout(resolve, 1));
  }
  await Promise.all(meters.map((meter) => meter.release()));
  return { rate: statements / ((performance.now() - started) / 1000), charges: statements };
}

/**
 * `sessions` loops for `durationS` seconds, each awaiting one durable charge at a time, except charge-stream:
 * - reserve-release: reserveFunds then releaseWithCharge per charge (the REST gateway's two round trips);
 * - charge-writer: each session holds one reservation and awaits ChargeWriter.enqueue per charge (the wire
 *   proxy's group commit: charges of concurrent sessions share a round trip);
 * - charge-stream: the proxy's own pattern, charges queued without waiting (see `stream`).
 * Every session is the same agent (one balance row), as when one agent opens many proxy sessions.
 */
async function measure(
  db: pg.Pool,
  mode: LedgerMode,
  sessions: number,
  agent: { wallet: string; providerId: string },
  durationS: number,
) {
  const target = { agentWallet: agent.wallet, providerId: agent.providerId };
  if (mode === "charge-stream") return stream(db, sessions, target, durationS);
  if (mode === "charge-windows") return meteredStream(db, sessions, target, durationS);
  const writer = new ChargeWriter(db, { ttlSeconds: 300 });
  const until = performance.now() + durationS * 1000;
  let charges = 0;
  const loop = async () => {
    if (mode === "reserve-release") {
      while (performance.now() < until) {
        const reservation = await reserveFunds(db, {
          ...target,
          minMicro: COST_MICRO,
          maxMicro: COST_MICRO,
          ttlSeconds: 300,
        });
        if (!reservation) throw new Error("the ledger benchmark's agent ran out of funds");
        await releaseWithCharge(db, reservation, COST_MICRO, chargeMetadata(charges));
        charges++;
      }
      return;
    }
    const reservation = await reserveFunds(db, {
      ...target,
      minMicro: 1_000_000_000n,
      maxMicro: 1_000_000_000n,
      ttlSeconds: 300,
    });
    if (!reservation) throw new Error("the ledger benchmark's agent ran out of funds");
    try {
      while (performance.now() < until) {
        await writer.enqueue({
          reservationId: reservation.id,
          ...target,
          costMicro: COST_MICRO,
          metadata: chargeMetadata(charges),
        });
        charges++;
      }
    } finally {
      await releaseWithCharge(db, reservation, 0n, {});
    }
  };
  const started = performance.now();
  await Promise.all(Array.from({ length: sessions }, loop));
  return { rate: charges / ((performance.now() - started) / 1000), charges };
}

async function isConsistent(db: pg.Pool, agent: { wallet: string; providerId: string }): Promise<boolean> {
  const { rows } = await db.query<{ ok: boolean }>(
    `SELECT b.balance_micro = (SELECT sum(amount_micro) FROM ledger_entries e WHERE e.agent_wallet = b.agent_wallet AND e.provider_id = b.provider_id)
            AND b.reserved_micro = 0
            AND NOT EXISTS (SELECT 1 FROM reservations r WHERE r.agent_wallet = b.agent_wallet AND r.provider_id = b.provider_id) AS ok
       FROM balances b WHERE b.agent_wallet = $1 AND b.provider_id = $2`,
    [agent.wallet, agent.providerId],
  );
  return rows[0]?.ok === true;
}

/**
 * Cleans up after the cells before (vacuum and analyze, then a checkpoint), so that a cell's PostgreSQL CPU is its
 * own work, not the autovacuum or checkpoint of the hundreds of thousands of entries the cells before wrote.
 */
async function quiesce(db: pg.Pool): Promise<void> {
  await db.query("VACUUM ANALYZE");
  await db.query("CHECKPOINT");
}

interface LedgerRunOptions {
  metaUrl: string;
  providerId: string;
  sessions: number[];
  runs: number;
  durationS: number;
  /**
   * Length of a charge-windows run: longer than the others, as windows are written every 250 ms and the CPU
   * accounting's 10 ms ticks are a third of a microsecond per statement in a 2-second run.
   */
  windowsDurationS: number;
  /** Cumulative CPU of PostgreSQL and this process. */
  sampleCpu(): CpuSnapshot;
  log(line: string): void;
}

/** One mode at one number of sessions: a warm-up, then `runs` measured runs. */
async function measureCell(
  db: pg.Pool,
  mode: LedgerMode,
  sessions: number,
  options: LedgerRunOptions,
): Promise<LedgerCell> {
  const agent = await fundedAgent(db, options.providerId);
  await quiesce(db);
  const rates: number[] = [];
  const cpu = { postgres: 0, client: 0, charges: 0 };
  await measure(db, mode, sessions, agent, 0.5);
  const durationS = mode === "charge-windows" ? options.windowsDurationS : options.durationS;
  for (let run = 1; run <= options.runs; run++) {
    const before = options.sampleCpu();
    const { rate, charges } = await measure(db, mode, sessions, agent, durationS);
    const spent = cpuSpent(before, options.sampleCpu());
    cpu.postgres += spent.postgres;
    cpu.client += spent.runner;
    cpu.charges += charges;
    rates.push(rate);
    options.log(
      `ledger ${mode.padEnd(14)} sessions=${String(sessions).padEnd(3)} run ${run}/${options.runs}: ${rate.toFixed(0)} charges/s`,
    );
  }
  return {
    mode,
    sessions,
    chargesPerSecond: spread(rates),
    cpuUsPerCharge: {
      postgres: (cpu.postgres * 1e6) / cpu.charges,
      client: (cpu.client * 1e6) / cpu.charges,
    },
    consistent: await isConsistent(db, agent),
  };
}

/** The ledger alone, from this process, against pgtoll's metadata database: written charges per second. */
export async function runLedgerThroughput(options: LedgerRunOptions): Promise<LedgerCell[]> {
  const cells: LedgerCell[] = [];
  await loadGuard();
  for (const mode of ["reserve-release", "charge-writer", "charge-stream", "charge-windows"] as const) {
    for (const sessions of options.sessions) {
      // A pool per cell, ended between cells: a backend that exits hands its CPU time over to the postmaster's
      // count of reaped children, and the kernel's two figures differ by a few percent. The connections of a busy
      // cell that closed during a later one (idle timeout) once put 0.48 s into one 2-second run of that cell
      // (18 us per statement against 3).
      const db = createMetadataPool(options.metaUrl, Math.max(sessions, 1));
      try {
        cells.push(await measureCell(db, mode, sessions, options));
      } finally {
        await db.end();
        // The backends exit after their clients close: let them be gone before the next cell is measured.
        await new Promise((resolve) => setTimeout(resolve, 500));
      }
    }
  }
  return cells;
}
