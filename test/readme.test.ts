import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { flagName, optionSpecs } from "../src/config.js";

const readme = readFileSync(new URL("../README.md", import.meta.url), "utf8");

describe("README", () => {
  it("documents every configuration option with its flag and default", () => {
    for (const spec of Object.values(optionSpecs) as { env: string; defaultText?: string }[]) {
      const row = readme.split("\n").find((line) => line.startsWith(`| \`${spec.env}\` |`));
      expect(row, `${spec.env} is missing from the configuration table`).toBeDefined();
      expect(row).toContain(`\`--${flagName(spec.env)}\``);
      if (spec.defaultText) expect(row).toContain(`\`${spec.defaultText}\``);
    }
  });

  it("names the two set-up commands", () => {
    expect(readme).toContain("npm ci && npm run dev");
    expect(readme).toContain("npm ci && npm test");
  });
});
