import type { IdleMemoryResult } from "./idle-memory.js";
import type { Protocol } from "./pgbench.js";
import type { PgbenchCell, TargetName } from "./pgbench-matrix.js";
import type { RestResult } from "./rest-query.js";

/** One of issue 5's targets, computed from this run's medians. */
export interface TargetCheck {
  name: string;
  value: number | null;
  /** e.g. ">= 0.5" */
  target: string;
  /** null when this run did not measure it (suite skipped, configuration absent, or a side failed). */
  met: boolean | null;
  unit: string;
}

function cell(
  cells: PgbenchCell[],
  target: TargetName,
  clients: number,
  protocol: Protocol,
): PgbenchCell | undefined {
  const found = cells.find((c) => c.target === target && c.clients === clients && c.protocol === protocol);
  return found && Number.isFinite(found.tps.median) ? found : undefined;
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

/** A ratio printed beside the targets to explain them; it has no bound of its own. */
export interface ContextRatio {
  name: string;
  value: number | null;
}

/**
 * Where pgtoll's cost comes from: against the bare Node.js relay (what Node's socket path costs any proxy
 * written in it) and that relay against PgBouncer. Absent when the relay did not run.
 */
export function contextRatios(select: PgbenchCell[]): ContextRatio[] {
  const ratio = (a: TargetName, b: TargetName, clients: number, protocol: Protocol) => {
    const x = cell(select, a, clients, protocol);
    const y = cell(select, b, clients, protocol);
    return x && y ? x.tps.median / y.tps.median : null;
  };
  if (!select.some((c) => c.target === "node-relay")) return [];
  const clientCounts = [...new Set(select.map((c) => c.clients))].filter((n) => n > 1);
  const out: ContextRatio[] = [];
  for (const clients of clientCounts) {
    for (const protocol of ["simple", "prepared"] as const) {
      out.push(
        {
          name: `pgtoll / node relay TPS, ${clients} clients, ${protocol}`,
          value: ratio("pgtoll", "node-relay", clients, protocol),
        },
        {
          name: `node relay / PgBouncer TPS, ${clients} clients, ${protocol}`,
          value: ratio("node-relay", "pgbouncer", clients, protocol),
        },
      );
    }
  }
  return out;
}

/** Every target of issue 5, in its order. Ratios of TPS use medians; latency uses pooled p50. */
export function checkTargets(
  select: PgbenchCell[],
  rest: RestResult | null,
  memory: IdleMemoryResult | null,
): TargetCheck[] {
  const tpsRatio = (a: TargetName, b: TargetName, clients: number, protocol: Protocol) => {
    const x = cell(select, a, clients, protocol);
    const y = cell(select, b, clients, protocol);
    return x && y ? x.tps.median / y.tps.median : null;
  };
  const addedP50 = (protocol: Protocol) => {
    const x = cell(select, "pgtoll", 1, protocol);
    const y = cell(select, "direct", 1, protocol);
    return x && y ? x.latency.p50Us - y.latency.p50Us : null;
  };
  const restSide = (name: "baseline" | "pgtoll") => rest?.sides.find((s) => s.name === name && !s.error);
  const restPgtoll = restSide("pgtoll");
  const restBaseline = restSide("baseline");
  return [
    check("pgtoll / direct TPS, 10 clients, simple", tpsRatio("pgtoll", "direct", 10, "simple"), ">=", 0.5),
    check(
      "pgtoll / direct TPS, 10 clients, prepared",
      tpsRatio("pgtoll", "direct", 10, "prepared"),
      ">=",
      0.6,
    ),
    check(
      "pgtoll / PgBouncer TPS, 10 clients, simple",
      tpsRatio("pgtoll", "pgbouncer", 10, "simple"),
      ">=",
      1.0,
    ),
    check(
      "pgtoll / PgBouncer TPS, 10 clients, prepared",
      tpsRatio("pgtoll", "pgbouncer", 10, "prepared"),
      ">=",
      1.0,
    ),
    check(
      "pgtoll / PgBouncer TPS, 50 clients, simple",
      tpsRatio("pgtoll", "pgbouncer", 50, "simple"),
      ">=",
      1.0,
    ),
    check(
      "pgtoll / PgBouncer TPS, 50 clients, prepared",
      tpsRatio("pgtoll", "pgbouncer", 50, "prepared"),
      ">=",
      1.0,
    ),
    check("p50 latency added by pgtoll, 1 client, simple", addedP50("simple"), "<=", 150, "us"),
    check("p50 latency added by pgtoll, 1 client, prepared", addedP50("prepared"), "<=", 150, "us"),
    check(
      "POST /api/query / fastify+pg baseline RPS",
      restPgtoll && restBaseline ? restPgtoll.rps.median / restBaseline.rps.median : null,
      ">=",
      0.7,
    ),
    check(
      "proxy RSS added by 1 000 idle agent sessions",
      memory && memory.opened > 0 ? memory.mbPer1000 : null,
      "<=",
      100,
      "MB",
    ),
  ];
}
