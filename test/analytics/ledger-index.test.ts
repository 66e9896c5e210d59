import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EARNINGS_SQL } from "../../src/analytics/earnings-series.js";
import { SUMMARY_SQL } from "../../src/analytics/provider-summary.js";
import { AGENTS_SQL } from "../../src/analytics/top-agents.js";
import { TOP_SHAPES_SQL, UNLISTED_SQL } from "../../src/analytics/top-statements.js";
import { createMetadataDatabase } from "../support/database.js";
import { fillSyntheticLedger } from "../support/synthetic-ledger.js";

/**
 * The analytics read a provider's week out of a ledger of many providers and months: the planner must reach its
 * entries through ledger_entries_provider_time_idx, never by reading the whole ledger. (How fast on a million
 * entries is measured in bench/analytics-ledger.ts.)
 */
let meta: Awaited<ReturnType<typeof createMetadataDatabase>>;
let providerId: string;

beforeAll(async () => {
  meta = await createMetadataDatabase();
  const ledger = await fillSyntheticLedger(meta.pool, {
    providers: 40,
    agentsPerProvider: 50,
    entries: 60_000,
    days: 90,
  });
  providerId = ledger.providerIds[0]!;
}, 60_000);
afterAll(async () => meta?.close());

const to = new Date();
const from = new Date(to.getTime() - 7 * 86_400_000);
const queries: [string, string, unknown[]][] = [
  ["summary", SUMMARY_SQL, [from, to, from]],
  ["earnings", EARNINGS_SQL, ["day"]],
  ["agents", AGENTS_SQL, [21, null, null]],
  ["statements", TOP_SHAPES_SQL, [10]],
  ["other shapes", UNLISTED_SQL, []],
];

describe("the analytics queries on a ledger of 40 providers over 90 days", () => {
  it.each(queries)(
    "%s reads the provider's range by the provider and time index",
    async (_name, sql, extra) => {
      const params = sql === SUMMARY_SQL ? [providerId, ...extra] : [providerId, from, to, ...extra];
      const { rows } = await meta.pool.query<{ "QUERY PLAN": unknown }>(
        `EXPLAIN (FORMAT JSON) ${sql}`,
        params,
      );
      const onLedger = planNodes(rows[0]!["QUERY PLAN"]).filter(
        (node) => node["Relation Name"] === "ledger_entries" || node["Index Name"] !== undefined,
      );
      // A bitmap heap scan names the table and its bitmap index scan the index; a seq scan names no index.
      expect(onLedger.length).toBeGreaterThan(0);
      expect(onLedger.every((node) => node["Node Type"] !== "Seq Scan")).toBe(true);
      expect(onLedger.some((node) => node["Index Name"] === "ledger_entries_provider_time_idx")).toBe(true);
    },
  );
});

type PlanNode = Record<string, unknown> & { Plans?: PlanNode[] };

/** Every node of an EXPLAIN (FORMAT JSON) plan. */
function planNodes(explained: unknown): PlanNode[] {
  const walk = (node: PlanNode): PlanNode[] => [node, ...(node.Plans ?? []).flatMap(walk)];
  return (explained as { Plan: PlanNode }[]).flatMap((root) => walk(root.Plan));
}
