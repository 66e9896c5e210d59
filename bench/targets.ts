import type { CatalogResult } from "./catalog-read.js";
import type { IdleMemoryResult } from "./idle-memory.js";
import type { LedgerCell } from "./ledger-throughput.js";
import type { Protocol } from "./pgbench.js";
import type { PgbenchCell, TargetName } from "./pgbench-matrix.js";
import type { RestResult, RestSide } from "./rest-query.js";

/** One performance target, computed from this run's medians. */
export interface TargetCheck {
  name: string;
  value: number | null;
  /** e.g. ">= 0.5" */
  target: string;
  /** null when this run did not measure it (suite skipped, configuration absent, or a side failed). */
  met: boolean | null;
  unit: string;
  /** What explains the value, printed under it (e.g. both sides' CPU per transaction). */
  detail?: string;
}

function cell(
  cells: PgbenchCell[],
  target: TargetName,
  clients: number,
  protocol: Protocol,
  script?: PgbenchCell["script"],
): PgbenchCell | undefined {
  const found = cells.find(
    (c) =>
      c.target === target &&
      c.clients === clients &&
      c.protocol === protocol &&
      (script === undefined || c.script === script),
  );
  return found && Number.isFinite(found.tps.median) ? found : undefined;
}

/** Median TPS of `a` over `b` in the same configuration, or null when either did not run. */
function tpsRatio(
  cells: PgbenchCell[],
  a: TargetName,
  b: TargetName,
  clients: number,
  protocol: Protocol,
  script?: PgbenchCell["script"],
): number | null {
  const x = cell(cells, a, clients, protocol, script);
  const y = cell(cells, b, clients, protocol, script);
  return x && y ? x.tps.median / y.tps.median : null;
}

function check(
  name: string,
  value: number | null | undefined,
  op: ">=" | "<=",
  bound: number,
  unit = "",
): TargetCheck {
  const v = value === undefined || value === null || !Number.isFinite(value) ? null : value;
  return {
    name,
    value: v,
    target: `${op} ${bound}${unit ? ` ${unit}` : ""}`,
    met: v === null ? null : op === ">=" ? v >= bound : v <= bound,
    unit,
  };
}

const us = (n: number) => (Number.isFinite(n) ? Math.round(n).toString() : "-");

/**
 * One side's CPU per transaction: pgtoll's (its system time in brackets), PostgreSQL's, and the total of pgtoll,
 * PostgreSQL, pgbench and the kernel's.
 */
function cpuSide(c: PgbenchCell | undefined): string {
  if (!c) return "-";
  const u = c.cpuUsPerTransaction;
  const total = u.pgtoll + u.postgres + u.pgbench + u.kernel;
  return `pgtoll ${us(u.pgtoll)} (sys ${us(u.proxySystem)}), postgres ${us(u.postgres)}, total ${us(total)}`;
}

/**
 * The provider priced on every dimension against the rows-only one, same process, agent and database: TPS ratio
 * of the medians, and both sides' CPU per transaction, which says where a shortfall comes from (pgtoll's own
 * metering, or PostgreSQL's ledger work for more money moved per statement).
 */
function pricedCheck(
  cells: PgbenchCell[],
  name: string,
  clients: number,
  protocol: Protocol,
  script?: PgbenchCell["script"],
): TargetCheck {
  const priced = cell(cells, "pgtoll-priced", clients, protocol, script);
  const rowsOnly = cell(cells, "pgtoll", clients, protocol, script);
  const ratio = check(
    name,
    tpsRatio(cells, "pgtoll-priced", "pgtoll", clients, protocol, script),
    ">=",
    0.95,
  );
  if (!priced && !rowsOnly) return ratio;
  return {
    ...ratio,
    detail: `CPU us/transaction, priced: ${cpuSide(priced)}; rows only: ${cpuSide(rowsOnly)}`,
  };
}

/** A ratio printed beside the targets to explain them; it has no bound of its own. */
export interface ContextRatio {
  name: string;
  value: number | null;
}

/**
 * What explains the targets: pgtoll against direct PostgreSQL, against the bare Node.js relay (what Node's
 * socket path costs any proxy written in it) and that relay against PgBouncer, and the 100-row reads.
 */
export function contextRatios(
  select: PgbenchCell[],
  range: PgbenchCell[] = [],
  rest: RestResult | null = null,
): ContextRatio[] {
  const out: ContextRatio[] = [];
  const restRps = (name: RestSide["name"]) =>
    rest?.sides.find((s) => s.name === name && !s.error)?.rps.median;
  const restBaseline = restRps("baseline");
  const restFree = restRps("pgtoll-free");
  if (restBaseline && restFree)
    out.push({
      name: "POST /api/query at price 0 (no hold, no charge) / fastify+pg baseline RPS",
      value: restFree / restBaseline,
    });
  const clientCounts = [...new Set(select.map((c) => c.clients))].filter((n) => n > 1);
  for (const clients of clientCounts) {
    for (const protocol of ["simple", "prepared"] as const) {
      out.push(
        {
          name: `pgtoll / direct TPS, ${clients} clients, ${protocol}`,
          value: tpsRatio(select, "pgtoll", "direct", clients, protocol),
        },
        {
          name: `pgtoll / PgBouncer TPS, ${clients} clients, ${protocol}`,
          value: tpsRatio(select, "pgtoll", "pgbouncer", clients, protocol),
        },
      );
      if (!select.some((c) => c.target === "node-relay")) continue;
      out.push(
        {
          name: `pgtoll / node relay TPS, ${clients} clients, ${protocol}`,
          value: tpsRatio(select, "pgtoll", "node-relay", clients, protocol),
        },
        {
          name: `node relay / PgBouncer TPS, ${clients} clients, ${protocol}`,
          value: tpsRatio(select, "node-relay", "pgbouncer", clients, protocol),
        },
      );
    }
  }
  for (const clients of [...new Set(range.map((c) => c.clients))]) {
    out.push(
      {
        name: `100-row reads: pgtoll / PgBouncer TPS, ${clients} clients`,
        value: tpsRatio(range, "pgtoll", "pgbouncer", clients, "prepared", "range-100"),
      },
      {
        name: `100-row reads: pgtoll / pgtoll at price 0, ${clients} clients`,
        value: tpsRatio(range, "pgtoll", "pgtoll-free", clients, "prepared", "range-100"),
      },
      {
        name: `1000-row reads: pgtoll / pgtoll at price 0, ${clients} clients`,
        value: tpsRatio(range, "pgtoll", "pgtoll-free", clients, "prepared", "range-1000"),
      },
    );
  }
  return out;
}

export interface TargetInputs {
  /** Point reads: pgbench select-only. */
  select: PgbenchCell[];
  /** Result-set reads: range-1000 and range-100. */
  range: PgbenchCell[];
  rest: RestResult | null;
  ledger: LedgerCell[];
  memory: IdleMemoryResult | null;
  catalog?: CatalogResult | null;
}

/** Every target, in order. Ratios of TPS use medians; latency uses pooled p50. */
export function checkTargets({ select, range, rest, ledger, memory, catalog }: TargetInputs): TargetCheck[] {
  const addedP50 = (protocol: Protocol) => {
    const x = cell(select, "pgtoll", 1, protocol);
    const y = cell(select, "direct", 1, protocol);
    return x && y ? x.latency.p50Us - y.latency.p50Us : null;
  };
  const restSide = (name: RestSide["name"]) => rest?.sides.find((s) => s.name === name && !s.error);
  const restPgtoll = restSide("pgtoll");
  const restBaseline = restSide("baseline");
  const restHandMetered = restSide("hand-metered");
  const windows = ledger.find((c) => c.mode === "charge-windows" && c.sessions === 10);
  const checks: TargetCheck[] = [];
  checks.push(
    check(
      "POST /api/query / fastify+pg baseline RPS, 10 connections",
      restPgtoll && restBaseline ? restPgtoll.rps.median / restBaseline.rps.median : null,
      ">=",
      0.6,
    ),
    check(
      "POST /api/query / route metered by hand (balance check, query, UPDATE + INSERT committed) RPS, 10 connections",
      restPgtoll && restHandMetered ? restPgtoll.rps.median / restHandMetered.rps.median : null,
      ">=",
      2.5,
    ),
    check(
      "POST /api/query p50 latency added",
      restPgtoll && restBaseline ? restPgtoll.latency.p50Us - restBaseline.latency.p50Us : null,
      "<=",
      1000,
      "us",
    ),
    check(
      "100-row reads: pgtoll at price 0 / node relay TPS, 10 clients",
      tpsRatio(range, "pgtoll-free", "node-relay", 10, "prepared", "range-100"),
      ">=",
      0.9,
    ),
  );
  for (const clients of [10, 50])
    checks.push(
      check(
        `100-row reads: pgtoll / pgtoll at price 0 TPS, ${clients} clients`,
        tpsRatio(range, "pgtoll", "pgtoll-free", clients, "prepared", "range-100"),
        ">=",
        0.95,
      ),
    );
  for (const clients of [10, 50])
    checks.push(
      check(
        `1000-row reads: pgtoll / PgBouncer TPS, ${clients} clients`,
        tpsRatio(range, "pgtoll", "pgbouncer", clients, "prepared", "range-1000"),
        ">=",
        0.95,
      ),
    );
  // Node's socket path, not metering, bounds point reads: the bare Node relay is their reference (the
  // PgBouncer ratio stays among the context ratios).
  for (const protocol of ["simple", "prepared"] as const)
    checks.push(
      check(
        `point reads: pgtoll / node relay TPS, 10 clients, ${protocol}`,
        tpsRatio(select, "pgtoll", "node-relay", 10, protocol),
        ">=",
        0.9,
      ),
    );
  for (const clients of [10, 50])
    for (const protocol of ["simple", "prepared"] as const)
      checks.push(
        check(
          `point reads: pgtoll / pgtoll at price 0 TPS, ${clients} clients, ${protocol}`,
          tpsRatio(select, "pgtoll", "pgtoll-free", clients, protocol),
          ">=",
          0.95,
        ),
      );
  // Every pricing dimension at once against rows alone: point reads (where the minimum applies) and result sets.
  for (const protocol of ["simple", "prepared"] as const)
    checks.push(
      pricedCheck(
        select,
        `point reads: priced on every dimension / rows only TPS, 10 clients, ${protocol}`,
        10,
        protocol,
      ),
    );
  for (const script of ["range-100", "range-1000"] as const)
    for (const clients of [10, 50])
      checks.push(
        pricedCheck(
          range,
          `${script}: priced on every dimension / rows only TPS, ${clients} clients`,
          clients,
          "prepared",
          script,
        ),
      );
  checks.push(
    check(
      "ledger PostgreSQL CPU per metered statement (windows, 10 sessions)",
      windows?.cpuUsPerCharge.postgres,
      "<=",
      2,
      "us",
    ),
    check("p50 latency added by pgtoll, 1 client, simple", addedP50("simple"), "<=", 100, "us"),
    check("p50 latency added by pgtoll, 1 client, prepared", addedP50("prepared"), "<=", 100, "us"),
    check(
      "proxy RSS added by 1 000 idle agent sessions",
      memory && memory.opened > 0 ? memory.mbPer1000 : null,
      "<=",
      50,
      "MB",
    ),
  );
  if (catalog)
    for (const cell of catalog.cells)
      checks.push(
        check(
          `catalog ${cell.request}, ${catalog.providers} providers of ${catalog.tablesPerProvider} tables: p50`,
          cell.p50Ms,
          "<=",
          20,
          "ms",
        ),
      );
  return checks;
}
