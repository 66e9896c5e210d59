import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";
import { cruise, type IConfiguration } from "dependency-cruiser";
import { describe, expect, it } from "vitest";

const root = fileURLToPath(new URL("..", import.meta.url));
const rules = createRequire(import.meta.url)("../.dependency-cruiser.cjs") as IConfiguration;

describe("the source tree's imports", () => {
  it("have no cycles (dependency-cruiser, .dependency-cruiser.cjs)", async () => {
    const previous = process.cwd();
    process.chdir(root);
    try {
      const result = await cruise(["src"], {
        ...rules.options,
        validate: true,
        ruleSet: { forbidden: rules.forbidden },
      });
      const output = result.output as {
        summary: { violations: { from: string; cycle?: { name: string }[] }[] };
      };
      const cycles = output.summary.violations.map((v) =>
        [v.from, ...(v.cycle ?? []).map((step) => step.name)].join(" -> "),
      );
      expect(cycles).toEqual([]);
    } finally {
      process.chdir(previous);
    }
  }, 60_000);
});
