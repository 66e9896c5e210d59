import { createHash } from "node:crypto";
import type { ProjectCluster } from "./cluster.js";
import { badRequest } from "./control-error.js";
import type { Queryable } from "./sql.js";
import { databaseUsage, physicalDatabasesBy, sumUsage } from "./usage.js";

/**
 * The consumption history: what the cluster measures for each project (the same counters as a project's
 * `compute_time_seconds`, `active_time_seconds` and `synthetic_storage_size`), sampled by the management
 * sweep, and reported per timeframe as the difference between the samples at the timeframe's ends.
 */
export type Granularity = "hourly" | "daily" | "monthly";

/** How far back each granularity reaches (Neon's limits: 168 hours, 60 days, one year). */
const REACH_MS: Record<Granularity, number> = {
  hourly: 168 * 3_600_000,
  daily: 60 * 86_400_000,
  monthly: 366 * 86_400_000,
};

/** Records one sample of every project's cumulative counters (dropped databases included). */
export async function sampleConsumption(db: Queryable, cluster: ProjectCluster): Promise<number> {
  const { rows: projects } = await db.query(
    "SELECT id, retired_active_ms::float8 AS retired_active, retired_session_ms::float8 AS retired_session FROM projects",
  );
  if (!projects.length) return 0;
  const databases = await physicalDatabasesBy(
    db,
    "project",
    projects.map((p) => p.id as string),
  );
  const usage = await databaseUsage(cluster, [...databases.values()].flat());
  const ids: string[] = [];
  const active: number[] = [];
  const session: number[] = [];
  const size: number[] = [];
  for (const project of projects) {
    const total = sumUsage(usage, databases.get(project.id) ?? []);
    ids.push(project.id);
    active.push(total.activeMs + Number(project.retired_active));
    session.push(total.sessionMs + Number(project.retired_session));
    size.push(total.sizeBytes);
  }
  await db.query(
    `INSERT INTO consumption_samples (project_id, sampled_at, active_ms, session_ms, size_bytes)
     SELECT id, clock_timestamp(), a, s, b FROM unnest($1::text[], $2::float8[], $3::float8[], $4::float8[]) AS t(id, a, s, b)
     ON CONFLICT DO NOTHING`,
    [ids, active, session, size],
  );
  return ids.length;
}

export interface Timeframe {
  timeframe_start: string;
  timeframe_end: string;
  active_time_seconds: number;
  compute_time_seconds: number;
  written_data_bytes: number;
  synthetic_storage_size_bytes: number;
  logical_size_bytes: number;
}

/** The start of the granularity's unit holding `at` (UTC). */
function floorTo(at: Date, granularity: Granularity): Date {
  const d = new Date(at);
  d.setUTCMinutes(0, 0, 0);
  if (granularity !== "hourly") d.setUTCHours(0);
  if (granularity === "monthly") d.setUTCDate(1);
  return d;
}

function next(at: Date, granularity: Granularity): Date {
  const d = new Date(at);
  if (granularity === "hourly") d.setUTCHours(d.getUTCHours() + 1);
  else if (granularity === "daily") d.setUTCDate(d.getUTCDate() + 1);
  else d.setUTCMonth(d.getUTCMonth() + 1);
  return d;
}

/**
 * Checks and rounds a request's `from`, `to` and `granularity` as Neon does: both rounded down to the
 * granularity, `from` before `to`, and `from` within the granularity's reach. Returns the timeframes.
 */
export function timeframes(from: string, to: string, granularity: string, now = new Date()): Date[] {
  if (granularity !== "hourly" && granularity !== "daily" && granularity !== "monthly")
    throw badRequest(`granularity must be hourly, daily or monthly, got "${granularity}"`);
  const [start, end] = [new Date(from), new Date(to)];
  if (Number.isNaN(start.getTime())) throw badRequest(`from must be a date-time, got "${from}"`);
  if (Number.isNaN(end.getTime())) throw badRequest(`to must be a date-time, got "${to}"`);
  const [first, last] = [floorTo(start, granularity), floorTo(end, granularity)];
  if (first >= last) throw badRequest(`from must be before to once rounded to ${granularity}`);
  if (now.getTime() - first.getTime() > REACH_MS[granularity])
    throw badRequest(
      `${granularity} consumption reaches back ${REACH_MS[granularity] / 3_600_000} hours at most`,
    );
  const bounds = [first];
  while (bounds[bounds.length - 1]! < last) bounds.push(next(bounds[bounds.length - 1]!, granularity));
  return bounds;
}

/**
 * Each project's consumption per timeframe between `bounds` (consecutive boundaries). A counter's value at a
 * boundary is that of the last sample at or before it (0 before the first); a decrease (statistics reset) counts
 * as a new start. `written_data_bytes` is the growth of the databases' size over the timeframe (what PostgreSQL
 * can say of data written per database); sizes are those of the last sample in the timeframe.
 */
export async function consumptionOf(
  db: Queryable,
  projectIds: readonly string[],
  bounds: readonly Date[],
): Promise<Map<string, Timeframe[]>> {
  const { rows } = await db.query(
    `SELECT p.id AS project_id, b.i, coalesce(s.active_ms, 0) AS active, coalesce(s.session_ms, 0) AS session,
            coalesce(s.size_bytes, 0) AS size
       FROM unnest($1::text[]) AS p(id)
       CROSS JOIN unnest($2::timestamptz[]) WITH ORDINALITY AS b(at, i)
       LEFT JOIN LATERAL (SELECT * FROM consumption_samples c WHERE c.project_id = p.id AND c.sampled_at <= b.at
                          ORDER BY c.sampled_at DESC LIMIT 1) s ON true
      ORDER BY 1, 2`,
    [projectIds, bounds.map((b) => b.toISOString())],
  );
  const at = new Map<string, { active: number; session: number; size: number }[]>();
  for (const row of rows) {
    const list = at.get(row.project_id) ?? [];
    list.push({ active: Number(row.active), session: Number(row.session), size: Number(row.size) });
    at.set(row.project_id, list);
  }
  const grown = (before: number, after: number) => (after >= before ? after - before : after);
  const result = new Map<string, Timeframe[]>();
  for (const id of projectIds) {
    const values = at.get(id) ?? [];
    const frames: Timeframe[] = [];
    for (let i = 0; i + 1 < bounds.length; i++) {
      const [a, b] = [values[i]!, values[i + 1]!];
      frames.push({
        timeframe_start: bounds[i]!.toISOString(),
        timeframe_end: bounds[i + 1]!.toISOString(),
        active_time_seconds: Math.round(grown(a.session, b.session) / 1000),
        compute_time_seconds: Math.round(grown(a.active, b.active) / 1000),
        written_data_bytes: Math.max(0, Math.round(b.size - a.size)),
        synthetic_storage_size_bytes: Math.round(b.size),
        logical_size_bytes: Math.round(b.size),
      });
    }
    result.set(id, frames);
  }
  return result;
}

/** A stable id for a reported period, from what it covers (Neon gives each billing period a UUID). */
export function periodId(key: string, start: Date): string {
  const hex = createHash("sha256").update(`${key}:${start.toISOString()}`).digest("hex");
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-4${hex.slice(13, 16)}-8${hex.slice(17, 20)}-${hex.slice(20, 32)}`;
}
