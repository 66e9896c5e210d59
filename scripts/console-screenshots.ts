/**
 * Screenshots of the provider console for docs/console.md, from a running pgtoll (e.g. `pgtoll dev`, after the
 * demo agent's queries): `npx tsx scripts/console-screenshots.ts <console URL> <provider id> <API key> <dir>`.
 * Drives the system's Chromium (/usr/bin/chromium) with playwright-core.
 */
import { mkdir } from "node:fs/promises";
import { chromium } from "playwright-core";

const [consoleUrl, providerId, apiKey, dir = "docs/images"] = process.argv.slice(2);
if (!consoleUrl || !providerId || !apiKey) {
  console.error("usage: console-screenshots.ts <console URL> <provider id> <API key> [dir]");
  process.exit(2);
}
await mkdir(dir, { recursive: true });
const browser = await chromium.launch({ executablePath: "/usr/bin/chromium", args: ["--no-sandbox"] });
try {
  const page = await browser.newPage({ viewport: { width: 1200, height: 900 } });
  await page.goto(consoleUrl);
  await page.screenshot({ path: `${dir}/console-sign-in.png` });
  await page.getByLabel("Provider id").fill(providerId);
  await page.getByLabel("API key").fill(apiKey);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.locator('[data-figure="Revenue"] .value').waitFor();
  await page.locator("#earnings canvas").first().waitFor();
  await page.locator("#agents table").waitFor();
  await page.locator("#statements table").waitFor();
  await page.locator("#database-result.ok, #database-result.bad").waitFor();
  const shots: [string, string[]][] = [
    ["console-summary", ["#summary", "#earnings"]],
    ["console-rankings", ["#agents", "#statements"]],
    ["console-settings", ["#refusals", "#pricing", "#read-only", "#database"]],
  ];
  for (const [name, sections] of shots) {
    const boxes = await Promise.all(sections.map((s) => page.locator(s).boundingBox()));
    const top = Math.min(...boxes.map((b) => b!.y));
    const bottom = Math.max(...boxes.map((b) => b!.y + b!.height));
    await page.screenshot({
      path: `${dir}/${name}.png`,
      fullPage: true,
      clip: { x: 0, y: top - 8, width: 1200, height: bottom - top + 16 },
    });
  }
  await page.setViewportSize({ width: 390, height: 844 });
  await page.reload();
  await page.locator('[data-figure="Revenue"] .value').waitFor();
  await page.screenshot({ path: `${dir}/console-narrow.png` });
} finally {
  await browser.close();
}
