import { readFile } from "node:fs/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { OwnedTestDatabase } from "../support/database.js";
import {
  createProviderDatabase,
  registerPricedProvider,
  startTestGateway,
  type TestGateway,
} from "../support/gateway.js";
import { connectAgent, fundedTestAgent, startTestProxy, type TestProxy } from "../support/proxy.js";
import { waitForCharges } from "../support/real-clients.js";

/**
 * deploy/grafana/pgtoll-dashboard.json queries /metrics: every metric it names must be one a running gateway and
 * proxy export, and the per-provider series must carry what the ledger holds.
 */
const DASHBOARD = new URL("../../deploy/grafana/pgtoll-dashboard.json", import.meta.url);

let gateway: TestGateway;
let proxy: TestProxy;
let providerDb: OwnedTestDatabase;
let providerId: string;
let exposition: string;

/** The metric names in a dashboard's PromQL expressions, histogram series named by their histogram. */
function queriedMetrics(dashboard: { panels: { targets: { expr: string }[] }[] }): string[] {
  const names = dashboard.panels.flatMap((panel) =>
    panel.targets.flatMap((target) => target.expr.match(/\bpgtoll_[a-z0-9_]+/g) ?? []),
  );
  return [...new Set(names.map((name) => name.replace(/_(bucket|sum|count)$/, "")))].sort();
}

beforeAll(async () => {
  gateway = await startTestGateway();
  proxy = await startTestProxy(gateway);
  providerDb = await createProviderDatabase(20);
  ({ providerId } = await registerPricedProvider(gateway, providerDb.url));
  const agent = await fundedTestAgent(gateway, providerId, 1_000_000n);
  const rest = (sql: string) =>
    gateway.app.inject({
      method: "POST",
      url: "/api/query",
      payload: { sql, agentWallet: agent.wallet, providerId },
    });
  await rest("SELECT id FROM items WHERE id <= 4");
  await rest("TRUNCATE items");
  const client = await connectAgent(proxy, agent, providerId);
  await client.query("SELECT id FROM items WHERE id <= 6");
  await client.end();
  await waitForCharges(proxy);
  exposition = (await gateway.app.inject({ method: "GET", url: "/metrics" })).body;
});

afterAll(async () => {
  await proxy?.close();
  await gateway?.close();
  await providerDb?.drop();
});

describe("the Grafana dashboard", () => {
  it("queries only metrics that pgtoll exports", async () => {
    const dashboard = JSON.parse(await readFile(DASHBOARD, "utf8"));
    const queried = queriedMetrics(dashboard);
    expect(queried.length).toBe(14);
    const exported = new Set([...exposition.matchAll(/^# TYPE (\S+) /gm)].map((match) => match[1]));
    expect(queried.filter((name) => !exported.has(name))).toEqual([]);
  });

  it("shows per provider what the ledger charged, and refusals by rule", () => {
    const sample = (name: string, labels: string) =>
      Number(new RegExp(`^${name}\\{${labels}\\} (\\S+)$`, "m").exec(exposition)?.[1]);
    const provider = `provider="${providerId}"`;
    expect(sample("pgtoll_provider_revenue_micro_usdc_total", `${provider},surface="rest"`)).toBe(4000);
    expect(sample("pgtoll_provider_revenue_micro_usdc_total", `${provider},surface="proxy"`)).toBe(6000);
    expect(sample("pgtoll_provider_rows_total", `${provider},surface="proxy"`)).toBe(6);
    expect(sample("pgtoll_provider_statements_total", `${provider},surface="rest"`)).toBe(1);
    expect(sample("pgtoll_refusals_total", `${provider},kind="policy",rule="no-truncate"`)).toBe(1);
  });
});
