import { mkdir } from "node:fs/promises";
import type { AddressInfo } from "node:net";
import { type Browser, chromium, type Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { checksumAddress } from "../../src/billing/address.js";
import { formatMicro } from "../../src/billing/money.js";
import type { OwnedTestDatabase } from "../support/database.js";
import {
  createProviderDatabase,
  postProviderRegistration,
  registerPricedProvider,
  startTestGateway,
  type TestGateway,
} from "../support/gateway.js";
import {
  connectAgent,
  fundedTestAgent,
  startTestProxy,
  type TestAgent,
  type TestProxy,
} from "../support/proxy.js";
import { missingTool, waitForCharges } from "../support/real-clients.js";
import { ensureConsoleBuilt } from "./console-build.js";

/**
 * The console in headless Chromium (the system's, driven by playwright-core), against a gateway and proxy whose
 * agents have run SQL: what it shows is compared with the ledger and the API. A screenshot of each view goes to
 * artifacts/console/ (ignored by git).
 */
const CHROMIUM = "/usr/bin/chromium";
const SHOTS = new URL("../../artifacts/console/", import.meta.url).pathname;
const skipReason = missingTool(CHROMIUM, "apt-get install chromium");
if (skipReason) console.warn(`skipping the console's browser tests: ${skipReason}`);

let gateway: TestGateway;
let proxy: TestProxy;
let providerDb: OwnedTestDatabase;
let provider: { providerId: string; apiKey: string };
let agent: TestAgent;
let origin: string;
let browser: Browser;
let page: Page;
const requested: string[] = [];

async function ledgerRevenue(): Promise<bigint> {
  const { rows } = await gateway.ctx.db.query<{ revenue: string }>(
    "SELECT COALESCE(sum(-amount_micro), 0)::text AS revenue FROM ledger_entries WHERE provider_id = $1 AND type = 'query'",
    [provider.providerId],
  );
  return BigInt(rows[0]!.revenue);
}

async function shoot(name: string, selector?: string): Promise<void> {
  const path = `${SHOTS}${name}.png`;
  if (selector) await page.locator(selector).screenshot({ path });
  else await page.screenshot({ path, fullPage: true });
}

async function apiPricing() {
  const res = await gateway.app.inject({
    method: "GET",
    url: `/api/providers/${provider.providerId}/pricing`,
    headers: { "x-api-key": provider.apiKey },
  });
  return res.json();
}

describe.skipIf(skipReason !== null)("the provider console in Chromium", () => {
  beforeAll(async () => {
    await ensureConsoleBuilt();
    await mkdir(SHOTS, { recursive: true });
    gateway = await startTestGateway();
    await gateway.app.listen({ host: "127.0.0.1", port: 0 });
    origin = `http://127.0.0.1:${(gateway.app.server.address() as AddressInfo).port}`;
    proxy = await startTestProxy(gateway);
    providerDb = await createProviderDatabase(50);
    provider = await registerPricedProvider(gateway, providerDb.url);
    agent = await fundedTestAgent(gateway, provider.providerId, 5_000_000n);
    for (const sql of [
      "SELECT name FROM items WHERE id <= 5",
      "SELECT name FROM items WHERE id <= 8",
      "DROP TABLE items",
    ])
      await gateway.app.inject({
        method: "POST",
        url: "/api/query",
        payload: { sql, agentWallet: agent.wallet, providerId: provider.providerId },
      });
    const client = await connectAgent(proxy, agent, provider.providerId);
    await client.query("SELECT id, name FROM items WHERE id > 30");
    await client.end();
    await waitForCharges(proxy);
    await gateway.ctx.metrics.refusals.flushTo(gateway.ctx.db);
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox"] });
    page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    page.on("request", (request) => requested.push(request.url()));
  });

  afterAll(async () => {
    await browser?.close();
    await proxy?.close();
    await gateway?.close();
    await providerDb?.drop();
  });

  it("a wrong key is refused beside the key field", async () => {
    await page.goto(`${origin}/console`);
    await page.getByLabel("Provider id").fill(provider.providerId);
    await page.getByLabel("API key").fill("pgt_not-the-key");
    await page.getByRole("button", { name: "Sign in" }).click();
    await expect
      .poll(() => page.locator("#api-key-error").textContent())
      .toBe("Wrong API key for this provider.");
    expect(await page.getByLabel("API key").getAttribute("aria-invalid")).toBe("true");
    await shoot("sign-in-wrong-key", "#sign-in");
  });

  it("signs in, names the provider and shows the revenue the ledger holds", async () => {
    await page.getByLabel("API key").fill(provider.apiKey);
    await page.getByRole("button", { name: "Sign in" }).click();
    await expect.poll(() => page.locator("#who-id").textContent()).toBe("Test data");
    const revenue = page.locator('[data-figure="Revenue"] .value');
    await revenue.waitFor();
    expect(await revenue.textContent()).toBe(`${formatMicro(await ledgerRevenue())} USDC`);
    expect(await page.locator('[data-figure="Active agents"] .value').textContent()).toBe("1");
    expect(await page.evaluate("sessionStorage.length")).toBe(1);
    await shoot("summary", "#summary");
  });

  it("draws the earnings chart and lists the agent and its statement shapes", async () => {
    await page.locator("#earnings canvas").first().waitFor();
    await shoot("earnings", "#earnings");
    const wallet = page.locator(`#agents [data-wallet="${checksumAddress(agent.wallet)}"]`);
    await wallet.waitFor();
    await shoot("top-agents", "#agents");
    const shape = page.locator("#statements code.sql", { hasText: "SELECT name FROM items WHERE id <= $1" });
    await shape.waitFor();
    expect(await page.locator("#statements").textContent()).toContain(
      "SELECT id, name FROM items WHERE id > $1",
    );
    await shoot("top-statements", "#statements");
    await page.locator("#refusals code", { hasText: "no-drop" }).waitFor();
    await shoot("refusals", "#refusals");
    await expect
      .poll(() => page.locator("#database-result").textContent())
      .toMatch(/^Reachable: answered in/);
    await shoot("database", "#database");
  });

  it("reads the days chosen in the range picker", async () => {
    const today = new Date().toISOString().slice(0, 10);
    const yesterday = new Date(Date.now() - 86_400_000).toISOString().slice(0, 10);
    await page.locator("#range-preset").selectOption("custom");
    await page.locator("#range-from").fill(yesterday);
    await page.locator("#range-to").fill(today);
    await page.locator("#granularity").selectOption("hour");
    await expect
      .poll(() => page.locator("#earnings .note").textContent())
      .toMatch(/^Revenue per hour from .* over 48 buckets\.$/);
    expect(await page.locator('[data-figure="Revenue"] .value').textContent()).toBe(
      `${formatMicro(await ledgerRevenue())} USDC`,
    );
    await shoot("range-picker", "#range-form");
  });

  it("a bad price is shown beside its field and nothing is saved", async () => {
    const price = page.getByLabel("Price per 1000 rows (USDC)");
    await price.fill("-1");
    await page.getByRole("button", { name: "Save pricing" }).click();
    await expect
      .poll(() => page.locator("#pricing-basePricePer1000Rows-error").textContent())
      .toBe('"Price per 1000 rows (USDC)" must be between 0 and 1000000');
    expect(await page.locator("#pricing-status").textContent()).toBe(
      "Not saved: see the field marked above.",
    );
    expect(await page.evaluate("document.activeElement?.id")).toBe("pricing-basePricePer1000Rows");
    expect((await apiPricing()).basePricePer1000Rows).toBe(1);
    await shoot("pricing-bad-price", "#pricing");
  });

  it("a new price saved through the form is what the API reads back", async () => {
    await page.getByLabel("Price per 1000 rows (USDC)").fill("2.5");
    await page.getByLabel("Markup multiplier").fill("1.25");
    await page.getByLabel("Lock timeout (ms)").fill("7000");
    await page.getByRole("button", { name: "Save pricing" }).click();
    await expect.poll(() => page.locator("#pricing-status").textContent()).toMatch(/^Saved at /);
    expect(await apiPricing()).toMatchObject({
      basePricePer1000Rows: 2.5,
      markupMultiplier: 1.25,
      lockTimeoutMs: 7000,
    });
    await shoot("pricing", "#pricing");
  });

  it("shows and edits every price: the minimum, per MB, per second and table prices", async () => {
    await page.getByLabel("Minimum per statement (USDC)").fill("0.0005");
    await page.getByLabel("Price per MB of results (USDC)").fill("2");
    await page.getByLabel("Price per second of statement time (USDC)").fill("0.01");
    await page.getByRole("button", { name: "Add a table" }).click();
    await page.getByLabel("Table 1", { exact: true }).fill("items");
    await page.getByLabel("Price of table 1 per 1000 rows (USDC)").fill("7");
    await page.getByRole("button", { name: "Add a table" }).click();
    await page.getByLabel("Table 2", { exact: true }).fill("public.orders");
    await page.getByLabel("Price of table 2 per 1000 rows (USDC)").fill("3");
    await page.getByLabel("Allow folding a priced table's rows into one value").check();
    await page.getByRole("button", { name: "Save pricing" }).click();
    await expect.poll(() => page.locator("#pricing-status").textContent()).toMatch(/^Saved at /);
    expect(await apiPricing()).toMatchObject({
      minimumCostPerStatement: 0.0005,
      pricePerMB: 2,
      pricePerSecond: 0.01,
      tablePrices: { items: 7, "public.orders": 3 },
      allowRowFolding: true,
    });
    await shoot("pricing-every-dimension", "#pricing");

    // Shown again as saved after a reload; one table changed, the other removed.
    await page.reload();
    const price1 = page.getByLabel("Price of table 1 per 1000 rows (USDC)");
    await price1.waitFor();
    expect(await page.getByLabel("Table 1", { exact: true }).inputValue()).toBe("items");
    expect(await page.getByLabel("Price per second of statement time (USDC)").inputValue()).toBe("0.01");
    await price1.fill("8");
    await page.getByRole("button", { name: "Remove table 2" }).click();
    await page.getByRole("button", { name: "Save pricing" }).click();
    await expect.poll(async () => (await apiPricing()).tablePrices).toEqual({ items: 8 });
  });

  it("a bad table price is shown beside that table, in the form's words", async () => {
    await page.getByLabel("Price of table 1 per 1000 rows (USDC)").fill("-3");
    await page.getByRole("button", { name: "Save pricing" }).click();
    await expect
      .poll(() => page.locator("#pricing-tablePrices-error").textContent())
      .toBe('The price of table "items" must be between 0 and 1000000');
    expect(await page.evaluate("document.activeElement?.id")).toBe(
      await page.getByLabel("Price of table 1 per 1000 rows (USDC)").getAttribute("id"),
    );
    expect((await apiPricing()).tablePrices).toEqual({ items: 8 });
    await page.getByLabel("Price of table 1 per 1000 rows (USDC)").fill("8");
  });

  it("the read-only switch turns agents' sessions read-only", async () => {
    const toggle = page.getByRole("switch");
    expect(await toggle.getAttribute("aria-checked")).toBe("false");
    await toggle.click();
    await expect.poll(async () => (await apiPricing()).readOnly).toBe(true);
    await expect.poll(() => page.getByRole("switch").getAttribute("aria-checked")).toBe("true");
    await shoot("read-only", "#read-only");
  });

  it("lists the provider in the catalog, its table described, and takes it off again", async () => {
    await page.locator("#listing-form").waitFor();
    await page.getByLabel("Listed in the public catalog").check();
    await page.getByLabel("Name in the catalog").fill("Console test shop");
    await page.getByLabel("Description", { exact: true }).fill("Items sold in a test shop");
    await page.getByLabel("Tags", { exact: true }).fill("shop, console-test");
    expect(await page.locator("#listing-tables").textContent()).toContain(
      "Your tables are read from your database when you save.",
    );
    await page.getByRole("button", { name: "Save listing" }).click();
    // Saved, the tables read from the provider's database can be described.
    await page.getByLabel("What items holds").fill("one row per item");
    const itemsTable = page.locator('[data-table="items"]');
    await itemsTable.getByText("Describe the columns of items").click();
    await itemsTable.getByLabel("name (text)", { exact: true }).fill("what the item is called");
    await page.getByRole("button", { name: "Save listing" }).click();
    await expect
      .poll(() => page.locator("#listing-status").textContent())
      .toBe("Saved: listed in the catalog.");
    const found = await gateway.app.inject({ method: "GET", url: "/api/providers?tag=console-test" });
    expect(found.json().providers.map((p: { id: string }) => p.id)).toEqual([provider.providerId]);
    const profile = await gateway.app.inject({ method: "GET", url: `/api/providers/${provider.providerId}` });
    expect(profile.json()).toMatchObject({
      name: "Console test shop",
      description: "Items sold in a test shop",
      tags: ["shop", "console-test"],
    });
    const items = profile.json().tables.find((t: { name: string }) => t.name === "items");
    expect(items.description).toBe("one row per item");
    expect(items.columns.find((c: { name: string }) => c.name === "name").description).toBe(
      "what the item is called",
    );
    await shoot("listing", "#listing");

    await page.getByLabel("Listed in the public catalog").uncheck();
    await page.getByRole("button", { name: "Save listing" }).click();
    await expect.poll(() => page.locator("#listing-status").textContent()).toBe("Saved: not listed.");
    const gone = await gateway.app.inject({ method: "GET", url: `/api/providers/${provider.providerId}` });
    expect(gone.statusCode).toBe(404);
  });

  it("fits a narrow window without scrolling sideways", async () => {
    await page.setViewportSize({ width: 375, height: 800 });
    await page.reload();
    await page.locator('[data-figure="Revenue"] .value').waitFor();
    await page.locator("#earnings canvas").first().waitFor();
    expect(await page.evaluate("document.documentElement.scrollWidth")).toBeLessThanOrEqual(375);
    await shoot("narrow-window");
  });

  it("a provider with no pricing yet sets its first price in the console", async () => {
    const registered = await postProviderRegistration(gateway, providerDb.url);
    const fresh = registered.json() as { provider: { id: string }; apiKey: string };
    const other = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    try {
      await other.goto(`${origin}/console`);
      await other.getByLabel("Provider id").fill(fresh.provider.id);
      await other.getByLabel("API key").fill(fresh.apiKey);
      await other.getByRole("button", { name: "Sign in" }).click();
      const save = other.getByRole("button", { name: "Save first pricing" });
      await save.waitFor();
      expect(await other.locator("#pricing").textContent()).not.toContain("Could not load");
      expect(await other.locator("#read-only").textContent()).toContain("Save a first pricing above");
      await other.getByLabel("Price per 1000 rows (USDC)").fill("0.4");
      await save.click();
      await other.getByRole("switch").waitFor();
      expect(await other.locator("#pricing-status").textContent()).toMatch(/^Saved at /);
      const priced = await gateway.app.inject({
        method: "GET",
        url: `/api/providers/${fresh.provider.id}/pricing`,
      });
      expect(priced.json()).toMatchObject({ basePricePer1000Rows: 0.4, markupMultiplier: 1 });
      await other.locator("#pricing").screenshot({ path: `${SHOTS}pricing-first.png` });
    } finally {
      await other.close();
    }
  });

  it("asked nothing of any other origin", () => {
    expect(requested.length).toBeGreaterThan(5);
    expect(requested.filter((url) => !url.startsWith(`${origin}/`))).toEqual([]);
  });
});
