import uPlot from "uplot";
import type { Earnings } from "../answers.js";
import { h, show, table } from "../dom.js";
import { count, usdc, utc } from "../format.js";

let chart: uPlot | undefined;

/** Width of the chart: its container's, so it fits a narrow window. */
function widthOf(container: Element): number {
  return Math.max(240, Math.floor(container.getBoundingClientRect().width));
}

/**
 * Revenue per bucket as a uPlot chart, described for screen readers by its label and followed by the same
 * figures as a table.
 */
export function renderEarnings(container: Element, earnings: Earnings): void {
  chart?.destroy();
  const dayOnly = earnings.granularity === "day";
  const total = earnings.buckets.reduce((sum, b) => sum + Number(b.revenue), 0);
  const first = earnings.buckets[0];
  const last = earnings.buckets[earnings.buckets.length - 1];
  const description =
    first && last
      ? `Revenue per ${earnings.granularity} from ${utc(first.start, dayOnly)} to ${utc(last.start, dayOnly)}: ${total.toFixed(6)} USDC in all, over ${earnings.buckets.length} buckets.`
      : "No buckets in this range.";
  const plot = h("div", { class: "chart", role: "img", "aria-label": description });
  const rows = earnings.buckets.map((b) => [
    utc(b.start, dayOnly),
    usdc(b.revenue),
    count(b.statements),
    count(b.rows),
    count(b.agents),
  ]);
  show(
    container,
    plot,
    h("p", { class: "note", text: description }),
    h(
      "details",
      {},
      h("summary", { text: "Show as a table" }),
      table(
        `Earnings per ${earnings.granularity} (UTC)`,
        ["Start", "Revenue", "Statements", "Rows", "Agents"],
        rows,
        [1, 2, 3, 4],
      ),
    ),
  );
  const times = earnings.buckets.map((b) => Date.parse(b.start) / 1000);
  const half = (dayOnly ? 86_400 : 3_600) / 2;
  const revenue = earnings.buckets.map((b) => Number(b.revenue));
  chart = new uPlot(
    {
      width: widthOf(container),
      height: 220,
      tzDate: (ts) => uPlot.tzDate(new Date(ts * 1000), "Etc/UTC"),
      // Half a bucket of room either side, so the first and last bars are whole.
      scales: {
        x: { time: true, range: (_u, min, max) => [min - half, max + half] },
        y: { range: (_u, _min, max) => [0, max > 0 ? max * 1.1 : 1] },
      },
      series: [
        {},
        {
          label: "Revenue (USDC)",
          stroke: "#1d4ed8",
          fill: "rgba(29, 78, 216, 0.15)",
          width: 2,
          points: { show: false },
          paths: uPlot.paths.bars?.({ size: [0.8, 40] }),
          value: (_u, v) => (v == null ? "" : v.toFixed(6)),
        },
      ],
      axes: [
        { stroke: "#333" },
        { stroke: "#333", size: 70, values: (_u, ticks) => ticks.map((t) => t.toFixed(4)) },
      ],
      // The figures are in the table below and the description above; a hover legend adds nothing for a reader.
      legend: { show: false },
    },
    [times, revenue],
    plot,
  );
}

/** Keeps the chart as wide as its container when the window changes. */
export function followWidth(container: Element): void {
  new ResizeObserver(() => chart?.setSize({ width: widthOf(container), height: 220 })).observe(container);
}
