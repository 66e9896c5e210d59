import { bucketCount, type Granularity, type TimeRange } from "../analytics/time-range.js";
import type { AgentCursor } from "../analytics/top-agents.js";
import { HttpError } from "./plugins/errors.js";

/** The range the analytics read when `from` is not given: the 7 days before `to`. */
export const DEFAULT_RANGE_MS = 7 * 86_400_000;
/** The longest range one request may read. */
export const MAX_RANGE_DAYS = 366;
/** The most buckets one earnings series has (a month of hours). */
export const MAX_BUCKETS = 744;

/** A date (`2026-05-01`, midnight UTC) or a date and time with a zone (`2026-05-01T12:00:00Z`, `…+02:00`). */
const ISO_TIME =
  /^(\d{4})-(\d{2})-(\d{2})(?:T(\d{2}):(\d{2})(?::(\d{2})(?:\.\d{1,9})?)?(?:Z|[+-](\d{2}):(\d{2})))?$/;

/** Days in `month` (1-12) of `year`, leap years counted. */
function daysIn(year: number, month: number): number {
  return new Date(Date.UTC(year, month, 0)).getUTCDate();
}

/**
 * True when every field names a real calendar date and clock time: `Date` would roll 2026-02-30 over to
 * 2 March and 24:00 to the next day rather than refuse them.
 */
function isRealTime(match: RegExpExecArray): boolean {
  const [, year, month, day, hour = "0", minute = "0", second = "0", zoneHour = "0", zoneMinute = "0"] =
    match.map((field) => field ?? undefined);
  const m = Number(month);
  return (
    m >= 1 &&
    m <= 12 &&
    Number(day) >= 1 &&
    Number(day) <= daysIn(Number(year), m) &&
    Number(hour) <= 23 &&
    Number(minute) <= 59 &&
    Number(second) <= 59 &&
    Number(zoneHour) <= 23 &&
    Number(zoneMinute) <= 59
  );
}

function timeParam(value: string | undefined, name: string): Date | undefined {
  if (value === undefined) return undefined;
  const match = ISO_TIME.exec(value);
  if (match && !isRealTime(match))
    throw new HttpError(400, `invalid ${name}: ${value} is not a real date and time`);
  const time = match ? new Date(value) : undefined;
  if (!time || Number.isNaN(time.getTime()))
    throw new HttpError(
      400,
      `invalid ${name}: expected an ISO 8601 date or time with a zone, e.g. 2026-05-01 or 2026-05-01T12:00:00Z`,
    );
  return time;
}

/** `from` and `to` of the query: [from, to), by default the 7 days up to now; 400 naming the parameter. */
export function rangeParams(query: { from?: string; to?: string }, now = new Date()): TimeRange {
  const to = timeParam(query.to, "to") ?? now;
  const from = timeParam(query.from, "from") ?? new Date(to.getTime() - DEFAULT_RANGE_MS);
  if (from.getTime() >= to.getTime()) throw new HttpError(400, "invalid from: must be before to");
  if (to.getTime() - from.getTime() > MAX_RANGE_DAYS * 86_400_000)
    throw new HttpError(400, `invalid from: a range covers at most ${MAX_RANGE_DAYS} days`);
  return { from, to };
}

/** `granularity`: hour or day; by default hours for a range of two days or less. */
export function granularityParam(value: string | undefined, range: TimeRange): Granularity {
  const granularity = value ?? (range.to.getTime() - range.from.getTime() <= 2 * 86_400_000 ? "hour" : "day");
  if (granularity !== "hour" && granularity !== "day")
    throw new HttpError(400, "invalid granularity: expected hour or day");
  if (bucketCount(range, granularity) > MAX_BUCKETS)
    throw new HttpError(
      400,
      `invalid granularity: ${granularity} buckets over this range would be more than ${MAX_BUCKETS}; use day or a shorter range`,
    );
  return granularity;
}

/** `limit`: an integer from 1 to `max`, `fallback` when absent. */
export function limitParam(value: string | undefined, fallback: number, max = 100): number {
  if (value === undefined) return fallback;
  const limit = /^\d{1,4}$/.test(value) ? Number(value) : Number.NaN;
  if (!(limit >= 1 && limit <= max))
    throw new HttpError(400, `invalid limit: expected an integer from 1 to ${max}`);
  return limit;
}

/** The opaque cursor of the next page of agents: base64url of `{"s": spent micro-USDC, "w": wallet}`. */
export function encodeAgentCursor(cursor: AgentCursor): string {
  return Buffer.from(JSON.stringify({ s: cursor.spentMicro.toString(), w: cursor.wallet })).toString(
    "base64url",
  );
}

/** A cursor from {@link encodeAgentCursor}; 400 naming `cursor` when it is not one. */
export function agentCursorParam(value: string | undefined): AgentCursor | null {
  if (value === undefined) return null;
  const invalid = () =>
    new HttpError(400, "invalid cursor: pass the nextCursor of the previous page unchanged");
  let decoded: unknown;
  try {
    decoded = /^[A-Za-z0-9_-]{1,400}$/.test(value)
      ? JSON.parse(Buffer.from(value, "base64url").toString())
      : null;
  } catch {
    throw invalid();
  }
  const { s, w } = (decoded ?? {}) as { s?: unknown; w?: unknown };
  if (typeof s !== "string" || !/^\d{1,19}$/.test(s) || typeof w !== "string" || !/^0x[0-9a-f]{40}$/.test(w))
    throw invalid();
  return { spentMicro: BigInt(s), wallet: w };
}
