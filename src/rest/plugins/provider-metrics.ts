import { Counter, type Registry } from "prom-client";
import { EarningsTally } from "../../analytics/earnings-tally.js";
import { RefusalTally } from "../../analytics/refusal-tally.js";

/**
 * Per-provider figures for /metrics: statements, rows and revenue charged, and refused statements by rule. Each is
 * counted in a plain tally where it happens and moved into its counter when the registry is read, so the hot
 * path never hashes Prometheus labels.
 */
export function providerMetrics(registry: Registry) {
  const registers = [registry];
  const earnings = new EarningsTally();
  const refusals = new RefusalTally();
  // Whichever of the three is read first moves the sums into all three, so one scrape shows them together.
  const moveEarnings = () => {
    for (const sums of earnings.drain()) {
      const labels = { provider: sums.providerId, surface: sums.surface };
      statements.inc(labels, sums.statements);
      rows.inc(labels, sums.rows);
      revenue.inc(labels, Number(sums.costMicro));
    }
  };
  const byProvider = { labelNames: ["provider", "surface"] as const, registers, collect: moveEarnings };
  const statements = new Counter({
    name: "pgtoll_provider_statements_total",
    help: "Charged statements by provider and surface (proxy, rest); a REST request counts as one",
    ...byProvider,
  });
  const rows = new Counter({
    name: "pgtoll_provider_rows_total",
    help: "Rows charged for, by provider and surface",
    ...byProvider,
  });
  const revenue = new Counter({
    name: "pgtoll_provider_revenue_micro_usdc_total",
    help: "Micro-USDC charged to agents, by provider and surface (a proxy window once it is closed)",
    ...byProvider,
  });
  new Counter({
    name: "pgtoll_refusals_total",
    help: "Statements refused, by provider, kind (policy, funds) and rule (a guard rule, invalid-sql, insufficient-balance, balance-cut-off)",
    labelNames: ["provider", "kind", "rule"] as const,
    registers,
    collect() {
      for (const { providerId, kind, rule, refusals: count } of refusals.drainForMetrics())
        this.inc({ provider: providerId, kind, rule }, count);
    },
  });
  return { earnings, refusals };
}
