import type { Compared, Summary } from "../answers.js";
import { h, show } from "../dom.js";
import { change, count, usdc } from "../format.js";

function figure(label: string, value: Compared<string | number>, write: (v: never) => string): HTMLElement {
  const delta = change(value.change);
  return h(
    "div",
    { class: "figure", "data-figure": label },
    h("dt", { text: label }),
    h("dd", { class: "value", text: write(value.current as never) }),
    h(
      "dd",
      { class: `change ${delta.trend}` },
      h("span", { class: "visually-hidden", text: "Change from the previous period: " }),
      delta.text,
      value.change !== null &&
        h("span", { class: "previous", text: ` (before: ${write(value.previous as never)})` }),
    ),
  );
}

/** The five headline figures, each with the period before and the change. */
export function renderSummary(container: Element, summary: Summary): void {
  show(
    container,
    h(
      "dl",
      { class: "figures" },
      figure("Revenue", summary.revenue, usdc),
      figure("Statements", summary.statements, count),
      figure("Rows", summary.rows, count),
      figure("Active agents", summary.activeAgents, count),
      figure("Average cost per statement", summary.averageCostPerStatement, usdc),
    ),
  );
}
