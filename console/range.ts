/** The range picker's choices: the last 24 hours, 7, 30 or 90 days, each read by hour or by day. */
export const PRESETS = [
  { value: "24h", label: "Last 24 hours", ms: 86_400_000, granularity: "hour" },
  { value: "7d", label: "Last 7 days", ms: 7 * 86_400_000, granularity: "day" },
  { value: "30d", label: "Last 30 days", ms: 30 * 86_400_000, granularity: "day" },
  { value: "90d", label: "Last 90 days", ms: 90 * 86_400_000, granularity: "day" },
] as const;

export type Granularity = "hour" | "day";

export interface RangeChoice {
  from: string;
  to: string;
  granularity: Granularity;
}

/**
 * The range of a preset ending now, as `from`/`to` query values. Hour buckets over more than 31 days are more
 * than the API serves: the choice falls back to days.
 */
export function rangeOf(preset: string, granularity: Granularity): RangeChoice {
  const chosen = PRESETS.find((p) => p.value === preset) ?? PRESETS[1];
  const to = new Date();
  const from = new Date(to.getTime() - chosen.ms);
  const fits = granularity === "day" || chosen.ms <= 31 * 86_400_000;
  return { from: from.toISOString(), to: to.toISOString(), granularity: fits ? granularity : "day" };
}

/**
 * A range of whole UTC days, `first` to `last` inclusive (`YYYY-MM-DD`, as a date input gives them); null when
 * either is missing or `last` is before `first`. Hours are kept only up to 31 days, as for a preset.
 */
export function customRange(first: string, last: string, granularity: Granularity): RangeChoice | null {
  const from = Date.parse(`${first}T00:00:00Z`);
  const to = Date.parse(`${last}T00:00:00Z`) + 86_400_000;
  if (Number.isNaN(from) || Number.isNaN(to) || to <= from) return null;
  const fits = granularity === "day" || to - from <= 31 * 86_400_000;
  return {
    from: new Date(from).toISOString(),
    to: new Date(to).toISOString(),
    granularity: fits ? granularity : "day",
  };
}

export function rangeQuery(range: RangeChoice): string {
  return `from=${encodeURIComponent(range.from)}&to=${encodeURIComponent(range.to)}`;
}
