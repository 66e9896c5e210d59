import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { flagName, optionSpecs } from "../src/config.js";

const root = fileURLToPath(new URL("..", import.meta.url));
const readme = readFileSync(join(root, "README.md"), "utf8");
const docs = join(root, "docs");
const configuration = readFileSync(join(docs, "configuration.md"), "utf8");

/** Relative link targets of a markdown text, without their #anchors. */
function relativeLinks(text: string): string[] {
  return [...text.matchAll(/\]\(([^)\s]+)\)/g)]
    .map((match) => match[1]!)
    .filter((target) => !/^(https?:|mailto:|#)/.test(target))
    .map((target) => target.split("#")[0]!);
}

describe("README and docs", () => {
  it("documents every configuration option with its flag and default (docs/configuration.md)", () => {
    for (const spec of Object.values(optionSpecs) as { env: string; defaultText?: string }[]) {
      const row = configuration.split("\n").find((line) => line.startsWith(`| \`${spec.env}\` |`));
      expect(row, `${spec.env} is missing from the configuration table`).toBeDefined();
      expect(row).toContain(`\`--${flagName(spec.env)}\``);
      if (spec.defaultText) expect(row).toContain(`\`${spec.defaultText}\``);
    }
  });

  it("names the two set-up commands", () => {
    expect(readme).toContain("npm ci && npm run dev");
    expect(readme).toContain("npm ci && npm test");
  });

  it("keeps the README to one screen or so (at most 150 lines)", () => {
    expect(readme.split("\n").length).toBeLessThanOrEqual(150);
  });

  it("links only to files that exist, from the README and every docs page", () => {
    const pages = [
      join(root, "README.md"),
      ...readdirSync(docs)
        .filter((name) => name.endsWith(".md"))
        .map((name) => join(docs, name)),
    ];
    for (const page of pages) {
      for (const target of relativeLinks(readFileSync(page, "utf8"))) {
        expect(existsSync(join(dirname(page), target)), `${page} links to ${target}`).toBe(true);
      }
    }
  });

  it("links every docs page from the README", () => {
    for (const name of readdirSync(docs).filter((n) => n.endsWith(".md") && n !== "README.md")) {
      expect(readme, name).toContain(`(docs/${name})`);
    }
  });
});
