import type { AgentRow, Refusals, Statements } from "../answers.js";
import { h, show, table } from "../dom.js";
import { count, shortWallet, usdc, utc } from "../format.js";

/** Agents ranked by spend; rows of later pages are appended by {@link appendAgents}. */
export function renderAgents(container: Element, agents: AgentRow[], more: (() => void) | null): void {
  if (agents.length === 0) {
    show(container, h("p", { text: "No agent spent anything in this range." }));
    return;
  }
  const rendered = table(
    "Agents by spend in this range",
    ["Wallet", "Spent", "Statements", "Rows", "Balance now", "Last active"],
    agents.map(agentCells),
    [1, 2, 3, 4],
  );
  rendered.id = "agents-table";
  show(
    container,
    rendered,
    more && h("button", { type: "button", class: "secondary", id: "more-agents", text: "Show more agents" }),
  );
  container.querySelector("#more-agents")?.addEventListener("click", () => more?.());
}

function agentCells(agent: AgentRow): (Node | string)[] {
  return [
    h("code", { title: agent.wallet, "data-wallet": agent.wallet, text: shortWallet(agent.wallet) }),
    usdc(agent.spent),
    count(agent.statements),
    count(agent.rows),
    usdc(agent.balance),
    agent.lastActive ? utc(agent.lastActive) : "—",
  ];
}

/** Statement shapes ranked by revenue: the normalised text, with one sample in its title. */
export function renderStatements(container: Element, answer: Statements): void {
  if (answer.statements.length === 0) {
    show(container, h("p", { text: "No statement was charged in this range." }));
    return;
  }
  const rows: (Node | string)[][] = answer.statements.map((s) => [
    h("code", { class: "sql", title: `Sample: ${s.sample}`, text: s.normalized }),
    count(s.calls),
    count(s.rows),
    usdc(s.revenue),
  ]);
  if (answer.otherShapes.calls > 0)
    rows.push([
      "Other shapes (summed)",
      count(answer.otherShapes.calls),
      count(answer.otherShapes.rows),
      usdc(answer.otherShapes.revenue),
    ]);
  show(
    container,
    table(
      "Statement shapes by revenue in this range",
      ["Statement", "Calls", "Rows", "Revenue"],
      rows,
      [1, 2, 3],
    ),
  );
}

/** Refused statements: by policy rule and by the agents' funds. */
export function renderRefusals(container: Element, answer: Refusals): void {
  if (answer.total === 0) {
    show(container, h("p", { text: "No statement was refused in this range." }));
    return;
  }
  show(
    container,
    h("p", { text: `${count(answer.total)} ${answer.total === 1 ? "statement" : "statements"} refused.` }),
    answer.byRule.length > 0 &&
      table(
        "By policy rule",
        ["Rule", "Refused"],
        answer.byRule.map((r) => [h("code", { text: r.rule }), count(r.refusals)]),
        [1],
      ),
    answer.byFunds.length > 0 &&
      table(
        "By the agent's funds",
        ["Reason", "Refused"],
        answer.byFunds.map((r) => [r.reason, count(r.refusals)]),
        [1],
      ),
  );
}
