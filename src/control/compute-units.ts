/** Compute-unit defaults, taken from the project's default endpoint settings. */
export function computeUnits(settings: Record<string, unknown>): {
  min: number;
  max: number;
  suspend: number;
} {
  const min =
    typeof settings.autoscaling_limit_min_cu === "number" ? settings.autoscaling_limit_min_cu : 0.25;
  const max =
    typeof settings.autoscaling_limit_max_cu === "number"
      ? settings.autoscaling_limit_max_cu
      : Math.max(min, 0.25);
  const suspend = typeof settings.suspend_timeout_seconds === "number" ? settings.suspend_timeout_seconds : 0;
  return { min, max, suspend };
}
